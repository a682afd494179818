"""The model-parallel demo's model (TP = 2, PP = 2), split as Megatron splits
one: two pipeline stages, each a
column-parallel Linear, tanh, and a row-parallel Linear over T = 2 tensor
ranks (the second stage's after a LayerNorm), ending in a regression loss.
The whole model (for the single-process reference) and each slot's module
(for the trainers) hold the same initial values.

Stage 0: h = B(tanh(A(x)))              A column-, B row-parallel
Stage 1: out = D(tanh(C(norm(h))))      C column-, D row-parallel
Loss: the sum over samples of (out - y)^2.

A row-parallel layer's bias and the LayerNorm are the same on both tensor
ranks (tp_replicated); the inputs of column-parallel layers go through
copy_to_tp (identity forward, all-reduce of the gradient backward) and the
outputs of row-parallel ones through reduce_from_tp (all-reduce forward), as
in Megatron's tensor-parallel layers.

    python3 mp_toy.py > job.json    # the job file: one model per slot

prints the demo's job (every slot's params as zshard.spec prints them, the
trainer workload; its trainer is mp_trainer.py)."""

import json
import sys

import torch

D_IN, HIDDEN, TP, PP = 4, 8, 2, 2


def full():
    """The whole model, seeded."""
    torch.manual_seed(7)
    return torch.nn.ModuleDict({
        "a": torch.nn.Linear(D_IN, HIDDEN),
        "b": torch.nn.Linear(HIDDEN, HIDDEN),
        "norm": torch.nn.LayerNorm(HIDDEN),
        "c": torch.nn.Linear(HIDDEN, HIDDEN),
        "d": torch.nn.Linear(HIDDEN, 1),
    })


def job(steps=500, global_batch=8, optimizer=None):
    """The demo's job: T = 2, P = 2, up to two replicas (I = 2), each
    slot's params as `python -m zshard.spec mp_toy:slot --tp-rank T
    --pp-rank P` prints them."""
    from zshard.spec import model_spec
    slots = []
    for pp in range(PP):
        for tp in range(TP):
            slots.append({"tp": tp, "pp": pp,
                          "params": model_spec(slot(tp, pp))["params"]})
    return {
        "name": "mptoy",
        "parallel": {"tensor": TP, "pipeline": PP},
        "model": {"slots": slots},
        "layout": {"bucket_size": 64},
        "optimizer": optimizer or {"lr": 0.01, "weight_decay": 0.1,
                                   "clip_grad_norm": 1.0},
        "world": {"instances": 2, "min": 8, "max": 8},
        "lease_timeout_ms": 3000,
        "heartbeat_interval_ms": 300,
        "workload": {"kind": "trainer", "steps": steps,
                     "global_batch": global_batch,
                     "trainer_timeout_ms": 30000},
    }


def batch(n):
    torch.manual_seed(11)
    return torch.randn(n, D_IN), torch.randn(n, 1)


def full_loss(model, x, y):
    h = model["b"](torch.tanh(model["a"](x)))
    out = model["d"](torch.tanh(model["c"](model["norm"](h))))
    return ((out - y) ** 2).sum()


def _cut(linear, tp, column):
    """Tensor rank `tp`'s part of `linear`: rows (column-parallel: output
    features, with the bias) or columns (row-parallel: input features; the
    bias stays whole and replicated)."""
    w = linear.weight.detach()
    k = (w.shape[0] if column else w.shape[1]) // TP
    part = torch.nn.Linear(k if not column else w.shape[1],
                           k if column else w.shape[0])
    with torch.no_grad():
        if column:
            part.weight.copy_(w[tp * k:(tp + 1) * k])
            part.bias.copy_(linear.bias.detach()[tp * k:(tp + 1) * k])
        else:
            part.weight.copy_(w[:, tp * k:(tp + 1) * k])
            part.bias.copy_(linear.bias.detach())
            part.bias.tensor_model_parallel = False
    part.weight.tensor_model_parallel = True
    if column:
        part.bias.tensor_model_parallel = True
    return part


def slot(tp_rank, pp_rank):
    """The module of slot (tp_rank, pp_rank): its params in registration
    order (`python -m zshard.spec mp_toy:slot --tp-rank T --pp-rank P`
    prints its entry of the job's model.slots)."""
    tp, pp = tp_rank, pp_rank
    whole = full()
    if pp == 0:
        m = torch.nn.ModuleDict({"a": _cut(whole["a"], tp, True),
                                 "b": _cut(whole["b"], tp, False)})
    else:
        norm = whole["norm"]
        for p in norm.parameters():
            p.tensor_model_parallel = False
        m = torch.nn.ModuleDict({"norm": norm,
                                 "c": _cut(whole["c"], tp, True),
                                 "d": _cut(whole["d"], tp, False)})
    return m


def slot_params(full_state, tp, pp):
    """Slot (tp, pp)'s params cut from the whole model's `full_state`."""
    cut = {}
    k = HIDDEN // TP
    for name, value in full_state.items():
        layer, kind = name.split(".")
        if (layer in ("a", "b")) != (pp == 0):
            continue
        if layer in ("a", "c"):
            cut[name] = value[tp * k:(tp + 1) * k]
        elif layer in ("b", "d") and kind == "weight":
            cut[name] = value[:, tp * k:(tp + 1) * k]
        else:
            cut[name] = value
    return cut


class _CopyToTp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        import torch.distributed as dist
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        import torch.distributed as dist
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _row(linear, x, group):
    """A row-parallel Linear: the partial products summed over the tensor
    group, then the (replicated) bias."""
    partial = torch.nn.functional.linear(x, linear.weight)
    return _ReduceFromTp.apply(partial, group) + linear.bias


def stage_forward(m, pp, x, tp_group):
    if pp == 0:
        return _row(m["b"], torch.tanh(m["a"](x)), tp_group)
    h = _CopyToTp.apply(m["norm"](x), tp_group)
    return _row(m["d"], torch.tanh(m["c"](h)), tp_group)


if __name__ == "__main__":
    json.dump(job(), sys.stdout, indent=1)
    sys.stdout.write("\n")
