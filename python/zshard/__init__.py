"""zshard's Python side: train a PyTorch model through a zshard worker daemon.

`zshard.torch` turns a model into the job spec's `model` object
(`model_spec`); `python -m zshard.spec MODULE:FUNCTION` prints it.
"""

__all__ = ["torch"]
