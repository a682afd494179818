"""The job spec's model object of a PyTorch model, and its command:

    python -m zshard.spec MODULE:FUNCTION [--name NAME]
        [--tp-size T --tp-rank t] [--pp-size P --pp-rank p]

prints the job spec's `model` object (JSON) of the torch.nn.Module that
FUNCTION returns, for a job file: called with no arguments, or for one
model-parallel slot with the keyword arguments tp_size, tp_rank, pp_size
and pp_rank that were given (the object is then one entry of the job's
"model": {"slots": [...]}, with "tp" and "pp" set). Exit status 2
with one line on stderr for a bad argument or a module that fails to load.

The spec lists the trainable parameters in registration order, as
`named_parameters()` yields them, which is the order the planner lays the
buffers out from (docs/design.md section 3). torch is imported on the first
call of model_spec, not with this module.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import (TYPE_CHECKING, Any, Callable, Collection, Dict, List,
                    Optional, Set, Union)

if TYPE_CHECKING:
    import torch

__all__ = ["main", "model_spec"]

# A choice of parameters: None (the default rule), a collection of
# parameter names or a predicate (name, param) -> bool.
ParamChoice = Union[None, Collection[str],
                    Callable[[str, "torch.nn.Parameter"], bool]]
ParamPredicate = Callable[[str, "torch.nn.Parameter"], bool]


def _dtype_names() -> Dict[Any, str]:
    import torch
    return {torch.float32: "fp32", torch.bfloat16: "bf16",
            torch.float16: "fp16"}


def _selector(choice: ParamChoice,
              default: ParamPredicate) -> ParamPredicate:
    """A predicate (name, param) -> bool from None, a set of names or a
    callable."""
    if choice is None:
        return default
    if callable(choice):
        return choice
    names = set(choice)
    return lambda name, param: name in names


def _tied_ids(model: torch.nn.Module) -> Set[int]:
    """ids of parameters registered under more than one name (tied)."""
    seen: Dict[int, int] = {}
    for _, module in model.named_modules(remove_duplicate=False):
        for param in module._parameters.values():
            if param is not None:
                seen[id(param)] = seen.get(id(param), 0) + 1
    return {pid for pid, count in seen.items() if count > 1}


def model_spec(model: torch.nn.Module, name: Optional[str] = None,
               no_weight_decay: ParamChoice = None,
               expert: ParamChoice = None,
               tp_replicated: ParamChoice = None) -> Dict[str, Any]:
    """The job spec's `model` object for `model`.

    Every parameter with requires_grad, in registration order; a tied
    parameter appears once (under its first name) with `shared_embedding`.
    By default parameters of one dimension or none (biases, norms) are
    `no_weight_decay`, and a parameter is `expert` when it carries
    Megatron's mark (`param.allreduce is False`), and `tp_replicated`
    (the same values on every tensor-parallel rank of a model-parallel
    slot: the global norm counts it once) when it carries Megatron's
    `tensor_model_parallel = False`. A 0-d parameter has shape [1].

    Args:
        model: the model, as every trainer builds it.
        name: the model's name; default the class name in lower case.
        no_weight_decay: the parameters without weight decay: None (the
            default rule), a collection of parameter names or a callable
            (name, param) -> bool.
        expert: the expert parameters, chosen the same way.
        tp_replicated: the parameters replicated across tensor-parallel
            ranks, chosen the same way.

    Returns:
        {"name": ..., "params": [{"name", "shape", "dtype", and the marks
        "expert", "shared_embedding", "no_weight_decay", "tp_replicated"
        where true}]}, the
        JSON-ready object.

    Raises:
        TypeError: `model` is not a torch.nn.Module.
        ValueError: a parameter's dtype is not one the planner takes (bf16,
            fp16, fp32; the message names it), or no parameter is
            trainable.
    """
    import torch
    if not isinstance(model, torch.nn.Module):
        raise TypeError("model_spec needs a torch.nn.Module, not %s" %
                        type(model).__name__)
    dtypes = _dtype_names()
    no_decay = _selector(no_weight_decay, lambda n, p: p.dim() <= 1)
    is_expert = _selector(expert,
                          lambda n, p: getattr(p, "allreduce", True) is False)
    replicated = _selector(
        tp_replicated,
        lambda n, p: getattr(p, "tensor_model_parallel", True) is False)
    tied = _tied_ids(model)
    params: List[Dict[str, Any]] = []
    for pname, param in model.named_parameters():
        if not param.requires_grad:
            continue
        dtype = dtypes.get(param.dtype)
        if dtype is None:
            raise ValueError("param '%s' has dtype %s; zshard takes bf16, "
                             "fp16 or fp32" % (pname, param.dtype))
        entry: Dict[str, Any] = {
            "name": pname,
            "shape": list(param.shape) or [1],
            "dtype": dtype,
        }
        if is_expert(pname, param):
            entry["expert"] = True
        if id(param) in tied:
            entry["shared_embedding"] = True
        if no_decay(pname, param):
            entry["no_weight_decay"] = True
        if replicated(pname, param):
            entry["tp_replicated"] = True
        params.append(entry)
    if not params:
        raise ValueError("model %s has no trainable parameters" %
                         type(model).__name__)
    return {"name": name or type(model).__name__.lower(), "params": params}


# -- the command ------------------------------------------------------------

def _fail(message: str) -> int:
    print("zshard.spec: %s" % message, file=sys.stderr)
    return 2


def main(argv: Optional[List[str]] = None) -> int:
    """`python -m zshard.spec`: prints the model object of MODULE:FUNCTION.

    Args:
        argv: the arguments; default sys.argv[1:].

    Returns:
        The exit status: 0, or 2 after one line on stderr.
    """
    parser = argparse.ArgumentParser(
        prog="python -m zshard.spec",
        description="print the job spec's model object of a PyTorch model")
    parser.add_argument("target", help="MODULE:FUNCTION returning the model")
    parser.add_argument("--name", default=None, help="the model's name")
    slot = ("tp_size", "tp_rank", "pp_size", "pp_rank")
    for key in slot:
        parser.add_argument("--" + key.replace("_", "-"), type=int,
                            default=None,
                            help="passed to FUNCTION as %s=N" % key)
    args = parser.parse_args(argv)
    kwargs = {k: getattr(args, k) for k in slot
              if getattr(args, k) is not None}
    module_name, sep, function_name = args.target.partition(":")
    if not sep or not module_name or not function_name:
        return _fail("target must be MODULE:FUNCTION, not '%s'" % args.target)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # any import failure is the user's module's
        return _fail("cannot import '%s': %s" % (module_name, e))
    function = getattr(module, function_name, None)
    if not callable(function):
        return _fail("'%s' has no function '%s'" %
                     (module_name, function_name))
    try:
        spec = model_spec(function(**kwargs), name=args.name)
    except (TypeError, ValueError) as e:
        return _fail(str(e))
    if "tp_rank" in kwargs or "pp_rank" in kwargs:
        spec = {"tp": kwargs.get("tp_rank", 0), "pp": kwargs.get("pp_rank", 0),
                "params": spec["params"]}
    json.dump(spec, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
