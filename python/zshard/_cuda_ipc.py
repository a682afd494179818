"""The daemon's device buffers in the trainer's process: a CUDA IPC handle
(the 64 bytes of a cudaIpcMemHandle_t the daemon exported for one buffer's
allocation) opened with the CUDA runtime through ctypes, and wrapped as a
torch tensor through __cuda_array_interface__, with no copy.

Opening a buffer needs a CUDA build of torch and a GPU, and happens only
when a layout carries IPC handles (a daemon started with --device
cuda[:N]); importing this module loads neither torch nor the runtime."""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import TYPE_CHECKING, Optional

from zshard.errors import ZshardError

if TYPE_CHECKING:
    import torch

_LAZY_ENABLE_PEER_ACCESS = 1  # cudaIpcMemLazyEnablePeerAccess


class _Handle(ctypes.Structure):
    # Bytes, not c_char: ctypes copies a c_char array only up to its first
    # zero byte, and a handle has zeros inside.
    _fields_ = [("reserved", ctypes.c_ubyte * 64)]


def handle_from_bytes(raw: bytes) -> _Handle:
    """The cudaIpcMemHandle_t of the 64 bytes the daemon exported.

    Raises:
        ZshardError: `raw` is not 64 bytes long.
    """
    if len(raw) != ctypes.sizeof(_Handle):
        raise ZshardError("a CUDA IPC handle has %d bytes, want %d" %
                          (len(raw), ctypes.sizeof(_Handle)))
    return _Handle.from_buffer_copy(raw)


def _runtime() -> ctypes.CDLL:
    # The versioned names first: they find the runtime torch has loaded.
    names = ["libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
             ctypes.util.find_library("cudart"), "libcudart.so"]
    for name in names:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.cudaSetDevice.argtypes = [ctypes.c_int]
        lib.cudaIpcOpenMemHandle.argtypes = [
            ctypes.POINTER(ctypes.c_void_p), _Handle, ctypes.c_uint]
        lib.cudaIpcCloseMemHandle.argtypes = [ctypes.c_void_p]
        lib.cudaGetErrorString.restype = ctypes.c_char_p
        lib.cudaGetLastError.argtypes = []
        return lib
    raise ZshardError("the daemon's buffers are on a GPU but the CUDA "
                      "runtime (libcudart) cannot be loaded here")


class DeviceBuffer:
    """One opened allocation: `tensor` is a uint8 torch tensor over its
    `nbytes` bytes on cuda:`device`. close() unmaps it (tensors over it must
    be gone)."""

    tensor: Optional[torch.Tensor]
    ptr: Optional[int]

    def __init__(self, handle_hex: str, device: int, nbytes: int) -> None:
        """Opens the allocation whose handle is `handle_hex` (the hex of
        its 64 bytes) on cuda:`device`.

        Raises:
            ZshardError: this torch has no CUDA, the CUDA runtime cannot be
                loaded, or the runtime refused the handle.
        """
        import torch
        if not torch.cuda.is_available():
            raise ZshardError(
                "the daemon's buffers are on cuda:%d but this torch has no "
                "CUDA device" % device)
        handle = handle_from_bytes(bytes.fromhex(handle_hex))
        self._cuda = _runtime()
        self._check(self._cuda.cudaSetDevice(device), "cudaSetDevice")
        ptr = ctypes.c_void_p()
        self._check(self._cuda.cudaIpcOpenMemHandle(
            ctypes.byref(ptr), handle, _LAZY_ENABLE_PEER_ACCESS),
            "cudaIpcOpenMemHandle")
        self.ptr = ptr.value
        self.nbytes = nbytes
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1",
            "data": (self.ptr, False), "version": 2}
        self.tensor = torch.as_tensor(self, device="cuda:%d" % device)

    def _check(self, err: int, what: str) -> None:
        if err != 0:
            # Cleared, or torch's next CUDA call would report it as its own.
            self._cuda.cudaGetLastError()
            raise ZshardError("%s failed: %s" % (
                what, self._cuda.cudaGetErrorString(err).decode()))

    def close(self) -> None:
        """Unmaps the allocation; closing twice does nothing."""
        if self.ptr is not None:
            self.tensor = None
            self._cuda.cudaIpcCloseMemHandle(self.ptr)
            self.ptr = None
