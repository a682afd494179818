"""zshard's Python side: train a PyTorch model through a zshard worker daemon.

`zshard.torch.DistributedOptimizer` attaches a training loop to its worker
daemon; `zshard.torch.model_spec` turns a model into the job spec's `model`
object (`python -m zshard.spec MODULE:FUNCTION` prints it).
"""

from zshard._protocol import WorkerLost, ZshardError

__all__ = ["WorkerLost", "ZshardError"]
