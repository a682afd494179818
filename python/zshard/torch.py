"""PyTorch helpers: the job spec's model object from a torch.nn.Module.

The spec lists the trainable parameters in registration order, as
`named_parameters()` yields them, which is the order the planner lays the
buffers out from (docs/design.md section 3).
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


# ---------------------------------------------------------------------------
# The trainer attach API.

import bisect
import collections
import contextlib
import mmap
import os
import threading

from zshard import _protocol
from zshard._protocol import WorkerLost, ZshardError

_BY_NAME = {"fp32": torch.float32, "bf16": torch.bfloat16,
            "fp16": torch.float16}

StepInfo = collections.namedtuple(
    "StepInfo", ["step", "rank", "world", "global_batch", "lr"])
StepInfo.__doc__ = """What the daemon tells the trainer at the start of a
step: the 1-based step, this trainer's rank and the world size (both change
with re-shards), the job's global batch and the step's learning rate."""

StepResult = collections.namedtuple(
    "StepResult", ["step", "applied", "grad_norm", "loss", "failed"])
StepResult.__doc__ = """The outcome of a step: `applied` is False when a
non-finite gradient skipped it everywhere; `grad_norm` is the global norm
before clipping; `loss` the world's summed loss divided by the global batch
(None when no trainer passed one). `failed` is True when the step did not
complete because a peer was lost: nothing is lost, the world re-shards and
the next begin_step returns the step to run (this one again, or the next
if another rank completed it)."""


def _mapped(fd, nbytes):
    try:
        return mmap.mmap(fd, nbytes, mmap.MAP_SHARED,
                         mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)


class DistributedOptimizer:
    """Trains `model` through the zshard worker daemon at `socket` (default
    $ZSHARD_TRAINER_SOCKET): the daemon owns the optimizer state, the model's
    parameters and gradients become views into the daemon's buffers.

        opt = DistributedOptimizer(model)
        while (info := opt.begin_step()) is not None:
            loss = sum(loss_fn(model(x[b]), y[b]) for b in opt.samples(info))
            loss.backward()
            opt.step(loss)

    Each trainer backpropagates the SUM of its samples' losses; the daemon
    divides the summed gradient by the global batch.

    With `overlap_grad_reduce` (the default) each bucket is handed to the
    daemon as soon as backward has written the last of its gradients, and
    its reduce-scatter runs during the rest of backward. Call backward once
    per step then; to accumulate over several backward passes, run all but
    the last inside `with opt.no_sync():` (as with torch DDP). A gradient
    that changes after its bucket was handed over raises ZshardError, and
    the step is skipped on every rank (its StepResult has applied False)."""

    def __init__(self, model, socket=None, timeout=60.0, job=None,
                 overlap_grad_reduce=True):
        """Attaches `model` to the daemon at `socket` (waiting up to
        `timeout` seconds for the socket to appear). `job`, when given, must
        be the daemon's job name. Raises ZshardError with the daemon's one
        line when it refuses (another trainer attached, another job, a model
        that does not match the job's spec). `overlap_grad_reduce` False
        hands every gradient over in step() instead."""
        path = socket or os.environ.get("ZSHARD_TRAINER_SOCKET")
        if not path:
            raise ZshardError("no trainer socket: pass socket= or set "
                              "ZSHARD_TRAINER_SOCKET")
        self._model = model
        self._params = dict(model.named_parameters())
        self._spec = model_spec(model)
        self._maps = []
        self._grads = []
        self._info = None
        self._overlap = bool(overlap_grad_reduce)
        self._sync = True
        self._send_lock = threading.Lock()
        self._hooks = []      # (grad accumulator, hook handle) per param
        self._bucket_of = []  # param index -> (buffer, bucket)
        self._params_in = {}  # (buffer, bucket) -> number of params
        self._left = {}       # this step: params still to come per bucket
        self._fired = None    # this step: params whose gradient came
        self._discarded = False
        self._main = []       # param index -> fp32 grad view, or None
        self._cuda = None     # the daemon's CUDA device; None: host
        self._sock = _protocol.connect(path, timeout)
        _protocol.send(self._sock, {
            "type": "hello", "version": _protocol.PROTOCOL_VERSION,
            "pid": os.getpid(), "job": job, "model": self._spec})
        body, fds = _protocol.recv(self._sock)
        self._close_fds(fds)
        if body.get("type") == "error":
            self._sock.close()
            self._sock = None
            raise ZshardError(body.get("message", "refused by the daemon"))
        if body.get("type") != "welcome":
            raise ZshardError("the daemon answered %r to hello" %
                              body.get("type"))
        self.job = body.get("job")

    # -- the step ----------------------------------------------------------

    def begin_step(self):
        """Waits for the daemon's next step (while it is a spare or a
        re-shard runs), zeroes the gradient buffer and returns its StepInfo;
        None once the job's steps are done."""
        self._check_open()
        while True:
            body, fds = _protocol.recv(self._sock)
            kind = body.get("type")
            if kind == "init":
                self._write_initial(body, fds)
            elif kind == "layout":
                self._map_layout(body, fds)
            elif kind == "step":
                self.zero_grad()
                self._left = dict(self._params_in)
                self._fired = bytearray(len(self._bucket_of))
                self._discarded = False
                self._info = StepInfo(body["step"], body["rank"],
                                      body["world"], body["global_batch"],
                                      body["lr"])
                return self._info
            elif kind == "done":
                self._info = None
                return None
            elif kind == "error":
                raise ZshardError(body.get("message", "error"))
            else:
                self._close_fds(fds)
                raise ZshardError("unexpected message %r from the daemon" %
                                  kind)

    def samples(self, info):
        """This rank's sample indices of the step's global batch: b with
        b % world == rank."""
        return list(range(info.rank, info.global_batch, info.world))

    def step(self, loss=None):
        """Hands this rank's gradients (already in the buffer) to the daemon
        and returns once the updated params are in the model."""
        self._check_open()
        if self._info is None:
            raise ZshardError("step() without begin_step()")
        if loss is not None:
            loss = float(loss.detach() if isinstance(loss, torch.Tensor)
                         else loss)
        if self._cuda is not None:
            torch.cuda.synchronize(self._cuda)
        self._send({"type": "backward_done", "step": self._info.step,
                    "loss": loss})
        body, fds = _protocol.recv(self._sock)
        self._close_fds(fds)
        if body.get("type") == "error":
            raise ZshardError(body.get("message", "error"))
        if body.get("type") != "result":
            raise ZshardError("the daemon answered %r to a step" %
                              body.get("type"))
        self._info = None
        return StepResult(body["step"], body["applied"], body["grad_norm"],
                          body.get("loss"), body.get("failed", False))

    def zero_grad(self):
        """Zeroes the gradient buffer in place (the views stay)."""
        for g in self._grads:
            g.zero_()
        for index, main in enumerate(self._main):
            if main is not None:
                self._params[self._spec["params"][index]["name"]].grad = None

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside only accumulate gradients: no bucket is
        handed over (for all but the last micro-batch of a step)."""
        sync, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = sync

    # -- attach and detach -------------------------------------------------

    def close(self):
        """Detaches: the model keeps private copies of its current params
        and stays usable."""
        if self._sock is None:
            return
        with torch.no_grad():
            for p in self._params.values():
                p.data = p.data.clone()
                p.grad = None
                if hasattr(p, "main_grad"):
                    del p.main_grad
        self._main = []
        for _, handle in self._hooks:
            handle.remove()
        self._hooks = []
        self._info = None
        self._grads = []
        try:
            _protocol.send(self._sock, {"type": "detach"})
        except WorkerLost:
            pass
        self._sock.close()
        self._sock = None
        for m in self._maps:
            if hasattr(m, "ptr"):  # a device mapping: no view is left
                m.close()
        self._maps = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- internals ---------------------------------------------------------

    def _check_open(self):
        if self._sock is None:
            raise ZshardError("the optimizer is closed")

    def _send(self, body):
        with self._send_lock:
            _protocol.send(self._sock, body)

    def _grad_ready(self, index):
        """AccumulateGrad's hook of param `index`: adds its gradient into
        the fp32 buffer (grad_reduce_in_fp32), and hands its bucket over
        once every param of the bucket has its gradient."""
        main = self._main[index] if index < len(self._main) else None
        if main is not None:
            p = self._params[self._spec["params"][index]["name"]]
            if p.grad is not None:
                with torch.no_grad():
                    main.add_(p.grad)
                p.grad = None
        if (not self._overlap or not self._sync or self._info is None or
                self._sock is None or self._discarded):
            return
        step = self._info.step
        if self._fired[index]:
            name = self._spec["params"][index]["name"]
            self._discarded = True
            reason = ("param '%s' got a second gradient in step %d after its "
                      "bucket was handed over: call backward once per step, "
                      "or run all but the last backward inside "
                      "opt.no_sync()" % (name, step))
            self._send({"type": "discard", "step": step, "reason": reason})
            raise ZshardError(reason + "; this step is skipped")
        self._fired[index] = 1
        key = self._bucket_of[index]
        self._left[key] -= 1
        if self._left[key] == 0:
            if self._cuda is not None:
                # The daemon reads the bucket: backward's kernels for it
                # must be done.
                torch.cuda.current_stream(self._cuda).synchronize()
            self._send({"type": "bucket_ready", "step": step,
                        "buffer": key[0], "bucket": key[1]})

    def _hook_params(self):
        """Hooks every param's AccumulateGrad node once (the nodes are kept
        alive here, so the hooks stay)."""
        if self._hooks:
            return
        for index, entry in enumerate(self._spec["params"]):
            p = self._params[entry["name"]]
            with torch.enable_grad():
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
            handle = acc.register_hook(
                lambda *_, i=index: self._grad_ready(i))
            self._hooks.append((acc, handle))

    @staticmethod
    def _close_fds(fds):
        for fd in fds:
            os.close(fd)

    def _write_initial(self, body, fds):
        """Writes every param's current values, fp32 and flattened in
        registration order, into the segment the daemon passed."""
        if len(fds) != 1:
            self._close_fds(fds)
            raise ZshardError("init carries %d fds, want 1" % len(fds))
        numel = int(body["numel"])
        region = _mapped(fds[0], numel * 4)
        flat = torch.frombuffer(region, dtype=torch.float32, count=numel)
        offset = 0
        with torch.no_grad():
            for entry in self._spec["params"]:
                p = self._params[entry["name"]]
                n = p.numel()
                flat[offset:offset + n].copy_(p.detach().reshape(-1))
                offset += n
        del flat
        region.close()
        _protocol.send(self._sock, {"type": "init_done"})

    def _map_layout(self, body, fds):
        """Maps the daemon's buffers (memfd segments on the host, CUDA IPC
        handles on a GPU) and makes every param's .data (and .grad, or
        .main_grad with grad_reduce_in_fp32) views into them."""
        buffers = body["buffers"]
        cuda = body.get("cuda_device")
        if cuda is None:
            if len(fds) != 2 * len(buffers):
                self._close_fds(fds)
                raise ZshardError("layout carries %d fds for %d buffers" %
                                  (len(fds), len(buffers)))
            fds = list(fds)

            def open_buffer(i, pbytes, gbytes):
                pmap = _mapped(fds[2 * i], pbytes)
                fds[2 * i] = None
                gmap = _mapped(fds[2 * i + 1], gbytes)
                fds[2 * i + 1] = None
                return ([pmap, gmap],
                        lambda dt, n: torch.frombuffer(pmap, dtype=dt,
                                                       count=n),
                        lambda dt, n: torch.frombuffer(gmap, dtype=dt,
                                                       count=n))
            kept = []
        else:
            self._close_fds(fds)
            fds = []
            device = int(cuda)
            self._check_device(device)
            from zshard import _cuda_ipc

            def open_buffer(i, pbytes, gbytes):
                pdev = _cuda_ipc.DeviceBuffer(buffers[i]["param_ipc"], device,
                                              pbytes)
                gdev = _cuda_ipc.DeviceBuffer(buffers[i]["grad_ipc"], device,
                                              gbytes)
                return ([pdev, gdev], lambda dt, n: pdev.tensor.view(dt),
                        lambda dt, n: gdev.tensor.view(dt))
            # Older device mappings stay open until close(): a view may
            # outlive a re-layout.
            kept = list(self._maps)
        index_of = {e["name"]: i for i, e in enumerate(self._spec["params"])}
        bucket_of, params_in = [None] * len(index_of), {}
        maps, grads, views = [], [], []
        try:
            for i, b in enumerate(buffers):
                pdt = _BY_NAME[b["param_dtype"]]
                gdt = _BY_NAME[b["grad_dtype"]]
                numel = int(b["numel"])
                opened, pview, gview = open_buffer(
                    i, numel * _element_size(pdt), numel * _element_size(gdt))
                maps += opened
                pbuf, gbuf = pview(pdt, numel), gview(gdt, numel)
                grads.append(gbuf)
                ends = [int(end) for _, end in b.get("buckets", [])]
                for entry in b["params"]:
                    p = self._params[entry["name"]]
                    start, n = int(entry["start"]), p.numel()
                    k = bisect.bisect_right(ends, start)
                    if k == len(ends):
                        raise ZshardError("param '%s' lies in no bucket of "
                                          "the layout" % entry["name"])
                    bucket_of[index_of[entry["name"]]] = (i, k)
                    params_in[(i, k)] = params_in.get((i, k), 0) + 1
                    views.append((index_of[entry["name"]], p,
                                  pbuf[start:start + n].view(p.shape),
                                  gbuf[start:start + n].view(p.shape)))
        finally:
            self._close_fds([fd for fd in fds if fd is not None])
        main = [None] * len(index_of)
        with torch.no_grad():
            for index, p, data, grad in views:
                p.data = data
                if grad.dtype == p.dtype:
                    p.grad = grad
                else:
                    # grad_reduce_in_fp32: torch keeps .grad in the param's
                    # dtype; each backward's gradient is added into the
                    # fp32 buffer (.main_grad, as Megatron names it) by the
                    # param's AccumulateGrad hook.
                    p.grad = None
                    p.main_grad = grad
                    main[index] = grad
        # The old host mappings go once nothing refers to them.
        self._maps, self._grads = kept + maps, grads
        self._bucket_of, self._params_in, self._main = (bucket_of, params_in,
                                                        main)
        self._cuda = None if cuda is None else int(cuda)
        self._hook_params()

    def _check_device(self, device):
        for name, p in self._params.items():
            if p.device != torch.device("cuda", device):
                raise ZshardError("param '%s' is on %s; the daemon's buffers "
                                  "are on cuda:%d: move the model there "
                                  "first" % (name, p.device, device))


def _element_size(dtype):
    return torch.tensor([], dtype=dtype).element_size()
