"""zshard's Python side: train a PyTorch model through a zshard worker daemon.

`zshard.DistributedOptimizer` (zshard.optimizer) attaches a training loop to
its worker daemon; `zshard.model_spec` (zshard.spec) turns a model into the
job spec's `model` object (`python -m zshard.spec MODULE:FUNCTION` prints
it); `zshard.StepSampler` (zshard.data) gives each rank its samples of a
step. All three are also importable from zshard.torch, the first two's
first home.

Importing zshard does not import torch: DistributedOptimizer, StepSampler
and model_spec are loaded on first access, and model_spec imports torch
when called.
"""

import importlib
from typing import TYPE_CHECKING, Any, List

from zshard.errors import JobFailed, WorkerLost, ZshardError
from zshard.steps import StepInfo, StepResult

if TYPE_CHECKING:
    from zshard.data import StepSampler
    from zshard.optimizer import DistributedOptimizer
    from zshard.spec import model_spec

__all__ = ["DistributedOptimizer", "JobFailed", "StepInfo", "StepResult",
           "StepSampler", "WorkerLost", "ZshardError", "model_spec"]

# Loaded on first access: zshard.optimizer and zshard.data import torch,
# and zshard.spec
# must not be imported with the package, or `python -m zshard.spec` would
# find it loaded already (runpy warns then).
_LAZY = {"DistributedOptimizer": "zshard.optimizer",
         "StepSampler": "zshard.data",
         "model_spec": "zshard.spec"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module 'zshard' has no attribute %r" % name)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAZY))
