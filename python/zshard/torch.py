"""The PyTorch API under its first import path, kept for the code that
imports it from here (`from zshard.torch import DistributedOptimizer,
model_spec`). The definitions live in zshard.optimizer, zshard.spec,
zshard.data, zshard.steps and zshard.errors; `import zshard` exports them
too."""

from zshard.data import StepSampler
from zshard.errors import JobFailed, WorkerLost, ZshardError
from zshard.optimizer import DistributedOptimizer
from zshard.spec import model_spec
from zshard.steps import StepInfo, StepResult

__all__ = ["DistributedOptimizer", "JobFailed", "StepInfo", "StepResult",
           "StepSampler", "WorkerLost", "ZshardError", "model_spec"]
