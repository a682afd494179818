"""The trainer's views of its daemon's buffers: shared mappings of host
segments and views of CUDA IPC allocations."""

from __future__ import annotations

import mmap
import os
from typing import Callable

import torch

from zshard import _cuda_ipc

__all__ = ["ViewFactory", "device_view", "element_size", "mapped"]

# A buffer's tensor of `n` elements of a dtype, over one mapping.
ViewFactory = Callable[[torch.dtype, int], torch.Tensor]


def mapped(fd: int, nbytes: int) -> mmap.mmap:
    """A shared read-write mapping of `nbytes` of `fd`; closes `fd`."""
    try:
        return mmap.mmap(fd, nbytes, mmap.MAP_SHARED,
                         mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)


def device_view(buffer: _cuda_ipc.DeviceBuffer) -> ViewFactory:
    """Views of an open device buffer's bytes as a dtype."""
    tensor = buffer.tensor
    assert tensor is not None  # open until close()
    whole: torch.Tensor = tensor
    return lambda dtype, n: whole.view(dtype)


def element_size(dtype: torch.dtype) -> int:
    """The size in bytes of one element of `dtype`."""
    return torch.tensor([], dtype=dtype).element_size()
