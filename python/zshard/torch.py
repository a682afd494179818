"""PyTorch helpers: the job spec's model object from a torch.nn.Module.

The spec lists the trainable parameters in registration order, as
`named_parameters()` yields them, which is the order the planner lays the
buffers out from (DESIGN.md section 3).
"""

import torch

_DTYPES = {
    torch.float32: "fp32",
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
}


def _selector(choice, default):
    """A predicate (name, param) -> bool from None, a set of names or a
    callable."""
    if choice is None:
        return default
    if callable(choice):
        return choice
    names = set(choice)
    return lambda name, param: name in names


def _tied_ids(model):
    """ids of parameters registered under more than one name (tied)."""
    seen = {}
    for _, module in model.named_modules(remove_duplicate=False):
        for param in module._parameters.values():
            if param is not None:
                seen[id(param)] = seen.get(id(param), 0) + 1
    return {pid for pid, count in seen.items() if count > 1}


def model_spec(model, name=None, no_weight_decay=None, expert=None):
    """The job spec's `model` object for `model`.

    Every parameter with requires_grad, in registration order; a tied
    parameter appears once (under its first name) with `shared_embedding`.
    `no_weight_decay` and `expert` are None, a collection of parameter names
    or a callable (name, param) -> bool. By default parameters of one
    dimension or none (biases, norms) are `no_weight_decay`, and a parameter
    is `expert` when it carries Megatron's mark (`param.allreduce is
    False`). A 0-d parameter has shape [1]. Raises ValueError naming the
    parameter for a dtype the planner does not take (bf16, fp16, fp32)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError("model_spec needs a torch.nn.Module, not %s" %
                        type(model).__name__)
    no_decay = _selector(no_weight_decay, lambda n, p: p.dim() <= 1)
    is_expert = _selector(expert,
                          lambda n, p: getattr(p, "allreduce", True) is False)
    tied = _tied_ids(model)
    params = []
    for pname, param in model.named_parameters():
        if not param.requires_grad:
            continue
        dtype = _DTYPES.get(param.dtype)
        if dtype is None:
            raise ValueError("param '%s' has dtype %s; zshard takes bf16, "
                             "fp16 or fp32" % (pname, param.dtype))
        entry = {
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
        params.append(entry)
    if not params:
        raise ValueError("model %s has no trainable parameters" %
                         type(model).__name__)
    return {"name": name or type(model).__name__.lower(), "params": params}
