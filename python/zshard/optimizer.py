"""DistributedOptimizer: a PyTorch training loop attached to its zshard
worker daemon over the daemon's trainer socket (--trainer-socket). The
daemon owns the optimizer state; the model's parameters and gradients
become views into the daemon's buffers (memfd segments on the host, CUDA
IPC allocations on a GPU)."""

from __future__ import annotations

import bisect
import collections
import contextlib
import mmap
import os
import socket as _socket
import logging
import threading
import time
from typing import (Any, Callable, Deque, Dict, Iterator, List, Optional,
                    Tuple, Union)

import torch

from zshard import _cuda_ipc, _protocol
from zshard._buffers import ViewFactory as _ViewFactory
from zshard._buffers import device_view as _device_view
from zshard._buffers import element_size as _element_size
from zshard._buffers import mapped as _mapped
from zshard._param_gather import ParamGather, hook_modules
from zshard._protocol import attach as _attach, close_fds
from zshard._protocol import expect as _expect
from zshard.errors import JobFailed, WorkerLost, ZshardError
from zshard.spec import model_spec
from zshard.steps import StepInfo, StepResult, step_info

__all__ = ["DistributedOptimizer"]

_BY_NAME = {"fp32": torch.float32, "bf16": torch.bfloat16,
            "fp16": torch.float16}

# A trainer waiting in begin_step logs why this often (seconds).
WAIT_LOG_S = 10.0
_log = logging.getLogger("zshard")


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
    the step is skipped on every rank (its StepResult has applied False).

    With `overlap_param_gather` step() returns once the daemon's Adam step
    is done; the daemon all-gathers the updated params bucket by bucket in
    forward order meanwhile, and a forward pre-hook on every module with
    params waits for that module's buckets before it runs. Read params
    outside the model's forward only after wait_params().

    Attributes:
        job: the daemon's job name, from its welcome.
    """

    job: Optional[str]

    def __init__(self, model: torch.nn.Module, socket: Optional[str] = None,
                 timeout: float = 60.0, job: Optional[str] = None,
                 overlap_grad_reduce: bool = True,
                 overlap_param_gather: bool = False) -> None:
        """Attaches `model` to the daemon at `socket`. When this raises,
        the socket it opened is closed.

        Args:
            model: the model to train; every trainer builds it with the
                same initial params.
            socket: the daemon's trainer socket; default
                $ZSHARD_TRAINER_SOCKET.
            timeout: seconds to wait for the socket to appear.
            job: when given, the daemon's job name must be this.
            overlap_grad_reduce: False hands every gradient over in step()
                instead of bucket by bucket during backward.
            overlap_param_gather: True lets step() return before the
                updated params are gathered; each module's forward waits
                for its own (the results are bit-identical).

        Raises:
            ZshardError: no socket was given, none appeared within
                `timeout`, or the daemon refused (another trainer attached,
                another job, a model that does not match the job's spec);
                the message is the daemon's one line.
            WorkerLost: the daemon closed the socket before it answered.
            TypeError, ValueError: as model_spec, for a model it refuses.
        """
        path = socket or os.environ.get("ZSHARD_TRAINER_SOCKET")
        if not path:
            raise ZshardError("no trainer socket: pass socket= or set "
                              "ZSHARD_TRAINER_SOCKET")
        self._model = model
        self._params: Dict[str, torch.nn.Parameter] = dict(
            model.named_parameters())
        self._spec = model_spec(model)
        self._maps: List[Union[mmap.mmap, _cuda_ipc.DeviceBuffer]] = []
        self._grads: List[torch.Tensor] = []
        self._info: Optional[StepInfo] = None
        self._waiting = ""  # why the daemon is not stepping, as it said
        self._overlap = bool(overlap_grad_reduce)
        self._gather = ParamGather() if overlap_param_gather else None
        self._module_hooks: List[Any] = []
        self._sync = True
        self._send_lock = threading.Lock()
        # (grad accumulator, hook handle) per param.
        self._hooks: List[Tuple[Any, Any]] = []
        # param index -> (buffer, bucket).
        self._bucket_of: List[Optional[Tuple[int, int]]] = []
        # (buffer, bucket) -> number of params.
        self._params_in: Dict[Tuple[int, int], int] = {}
        # This step: params still to come per bucket.
        self._left: Dict[Tuple[int, int], int] = {}
        # This step: params whose gradient came.
        self._fired = bytearray()
        self._discarded = False
        # The daemon went away inside a gradient hook: raised by step(), not
        # inside autograd.
        self._lost: Optional[WorkerLost] = None
        # param index -> fp32 grad view, or None.
        self._main: List[Optional[torch.Tensor]] = []
        # The daemon's CUDA device; None: host.
        self._cuda: Optional[int] = None
        self._sock: Optional[_socket.socket] = None
        self._sock, welcome = _attach(path, timeout, job, self._spec)
        self.job = welcome.get("job")

    # -- the step ----------------------------------------------------------

    def begin_step(self) -> Optional[StepInfo]:
        """Waits for the daemon's next step (while it is a spare or a
        re-shard runs), zeroes the gradient buffer and returns the step.

        Returns:
            The step's StepInfo; None once the job's steps are done (on
            every trainer, a spare's included).

        Raises:
            JobFailed: the coordinator failed the job (its reason).
            WorkerLost: the daemon went away.
            ZshardError: the optimizer is closed, or the daemon reported an
                error or broke the protocol.
        """
        sock = self._check_open()
        try:
            return self._next_step(sock)
        except WorkerLost:
            self._release()
            raise

    def _next_step(self, sock: _socket.socket) -> Optional[StepInfo]:
        """begin_step's wait for the daemon's next step."""
        since = time.monotonic()
        while True:
            got = (self._gather.recv(sock, WAIT_LOG_S) if self._gather else
                   _protocol.recv_waiting(sock, WAIT_LOG_S))
            if got is None:  # nothing for a while: say why, as the daemon
                _log.warning(  # last heard it from the coordinator
                    "zshard: begin_step has waited %.0f s for its step: %s",
                    time.monotonic() - since,
                    self._waiting or "the daemon has not said why yet")
                continue
            body, fds = got
            kind = body.get("type")
            if kind == "waiting":
                self._waiting = str(body.get("reason", ""))
            elif kind == "init":
                self._write_initial(body, fds)
            elif kind == "layout":
                self._map_layout(body, fds)
                if self._gather is not None:
                    self._gather.reset()
            elif kind == "step":
                self.zero_grad()
                self._left = dict(self._params_in)
                self._fired = bytearray(len(self._bucket_of))
                self._discarded = False
                self._info = step_info(body)
                return self._info
            elif kind == "done":
                self._info = None
                self.wait_params()
                if body.get("failed"):
                    raise JobFailed("the job failed: %s" %
                                    body.get("reason", "no reason given"))
                return None
            elif kind == "error":
                raise ZshardError(body.get("message", "error"))
            else:
                close_fds(fds)
                raise ZshardError("unexpected message %r from the daemon" %
                                  kind)

    def samples(self, info: StepInfo) -> List[int]:
        """This rank's sample indices of the step's global batch.

        Args:
            info: the step, as begin_step returned it.

        Returns:
            Every b in [0, global_batch) with b % world == rank.
        """
        return list(range(info.rank, info.global_batch, info.world))

    def step(self, loss: Optional[Union[float, torch.Tensor]] = None
             ) -> StepResult:
        """Hands this rank's gradients (already in the buffer) to the daemon
        and returns once the updated params are in the model.

        Args:
            loss: this rank's summed loss (a float or a 0-d tensor), for
                the result's world loss; optional.

        Returns:
            The step's StepResult.

        Raises:
            WorkerLost: the daemon went away.
            ZshardError: the optimizer is closed, no begin_step() came
                first, or the daemon reported an error.
        """
        sock = self._check_open()
        if self._lost is not None:
            lost, self._lost = self._lost, None
            self._release()
            raise lost
        if self._info is None:
            raise ZshardError("step() without begin_step()")
        try:
            return self._finish_step(sock, loss)
        except WorkerLost:
            self._release()
            raise

    def _finish_step(self, sock: _socket.socket,
                     loss: Optional[Union[float, torch.Tensor]]
                     ) -> StepResult:
        """step()'s hand-over of the gradients and wait for the result."""
        if loss is not None:
            loss = float(loss.detach() if isinstance(loss, torch.Tensor)
                         else loss)
        if self._cuda is not None:
            torch.cuda.synchronize(self._cuda)
        done: Dict[str, Any] = {"type": "backward_done",
                                "step": self._info.step, "loss": loss}
        if self._gather is not None:
            done["overlap_param_gather"] = True
        self._send(done)
        gather = self._gather
        body = _expect(sock, "result", "a step", "error",
                       None if gather is None else
                       (lambda: gather.receive(sock)))
        self._info = None
        if self._gather is not None and body.get("param_gather"):
            self._gather.expect(body["step"], self._params_in)
        return StepResult(body["step"], body["applied"], body["grad_norm"],
                          body.get("loss"), body.get("failed", False))

    def discard_step(self, reason: str) -> None:
        """Skips this step's update on every rank (step() still follows):
        for a trainer whose forward or backward failed part way, e.g. when
        a model-parallel peer was lost, so that no partial gradient counts.
        """
        if self._info is not None and not self._discarded:
            self._discarded = True
            self._send({"type": "discard", "step": self._info.step,
                        "reason": reason})

    def wait_params(self) -> None:
        """Returns once every param of the last step is in place (with
        overlap_param_gather; at once without).

        Raises:
            WorkerLost: the daemon went away.
        """
        if self._gather is None or not self._gather.pending:
            return
        try:
            self._gather.wait(self._check_open())
        except WorkerLost:
            self._release()
            raise

    def _before_forward(self, indices: List[int]) -> None:
        """A module's forward pre-hook: waits for its params' buckets."""
        if self._gather is None or not self._gather.pending:
            return
        buckets = [self._bucket_of[i] for i in indices
                   if i < len(self._bucket_of)]
        try:
            self._gather.wait(self._check_open(),
                              [b for b in buckets if b is not None])
        except WorkerLost:
            self._release()
            raise

    def zero_grad(self) -> None:
        """Zeroes the gradient buffer in place (the views stay)."""
        for g in self._grads:
            g.zero_()
        for index, main in enumerate(self._main):
            if main is not None:
                self._params[self._spec["params"][index]["name"]].grad = None

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside only accumulate gradients: no bucket is
        handed over (for all but the last micro-batch of a step)."""
        sync, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = sync

    # -- attach and detach -------------------------------------------------

    def close(self) -> None:
        """Detaches: the model keeps private copies of its current params
        and stays usable. Closing twice does nothing."""
        if self._sock is None:
            return
        try:
            self.wait_params()  # the private copies are of complete params
            _protocol.send(self._sock, {"type": "detach"})
        except WorkerLost:
            pass
        self._release()

    def _release(self) -> None:
        """Lets go of the daemon: the params become private copies of their
        current values (nothing refers to its shared memory any more, so
        the model stays usable and the process can exit whenever), the
        hooks go and the socket closes. After a WorkerLost too."""
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
        for handle in self._module_hooks:
            handle.remove()
        self._module_hooks = []
        self._info = None
        self._grads = []
        self._sock.close()
        self._sock = None
        for m in self._maps:
            if isinstance(m, _cuda_ipc.DeviceBuffer):  # no view is left
                m.close()
        self._maps = []

    def __enter__(self) -> DistributedOptimizer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- internals ---------------------------------------------------------

    def _check_open(self) -> _socket.socket:
        if self._sock is None:
            raise ZshardError("the optimizer is closed")
        return self._sock

    def _send(self, body: Dict[str, Any]) -> None:
        with self._send_lock:
            _protocol.send(self._check_open(), body)

    def _grad_ready(self, index: int) -> None:
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
                self._sock is None or self._discarded or
                self._lost is not None):
            return
        try:
            self._hand_over(index)
        except WorkerLost as e:
            # Raised by step(), outside autograd: an exception thrown
            # through backward's engine while the params are views of the
            # daemon's memory has hung interpreters at exit.
            self._lost = e

    def _hand_over(self, index: int) -> None:
        """Counts param `index`'s gradient in its bucket and hands the
        bucket over once complete (or discards the step on a second
        gradient)."""
        step = self._info.step
        if self._fired[index]:
            name = self._spec["params"][index]["name"]
            reason = ("param '%s' got a second gradient in step %d after its "
                      "bucket was handed over: call backward once per step, "
                      "or run all but the last backward inside "
                      "opt.no_sync()" % (name, step))
            self.discard_step(reason)
            raise ZshardError(reason + "; this step is skipped")
        self._fired[index] = 1
        key = self._bucket_of[index]
        assert key is not None  # the layout places every param
        self._left[key] -= 1
        if self._left[key] == 0:
            if self._cuda is not None:
                # The daemon reads the bucket: backward's kernels for it
                # must be done.
                torch.cuda.current_stream(self._cuda).synchronize()
            self._send({"type": "bucket_ready", "step": step,
                        "buffer": key[0], "bucket": key[1]})

    def _hook_params(self) -> None:
        """Hooks every param's AccumulateGrad node once (the nodes are kept
        alive here, so the hooks stay), and with overlap_param_gather every
        module with params (a forward pre-hook)."""
        if self._gather is not None and not self._module_hooks:
            self._module_hooks = hook_modules(
                self._model, [self._params[e["name"]]
                              for e in self._spec["params"]],
                self._before_forward)
        if self._hooks:
            return
        for index, entry in enumerate(self._spec["params"]):
            p = self._params[entry["name"]]
            with torch.enable_grad():
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
            handle = acc.register_hook(
                lambda *_, i=index: self._grad_ready(i))
            self._hooks.append((acc, handle))

    def _write_initial(self, body: Dict[str, Any], fds: List[int]) -> None:
        """Writes every param's current values, fp32 and flattened in
        registration order, into the segment the daemon passed."""
        if len(fds) != 1:
            close_fds(fds)
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
        _protocol.send(self._check_open(), {"type": "init_done"})

    def _map_layout(self, body: Dict[str, Any], fds: List[int]) -> None:
        """Maps the daemon's buffers (memfd segments on the host, CUDA IPC
        handles on a GPU) and makes every param's .data (and .grad, or
        .main_grad with grad_reduce_in_fp32) views into them."""
        buffers = body["buffers"]
        cuda = body.get("cuda_device")
        pending: Deque[int]
        open_buffer: Callable[[int, int, int], Tuple[
            List[Any], _ViewFactory, _ViewFactory]]
        if cuda is None:
            if len(fds) != 2 * len(buffers):
                close_fds(fds)
                raise ZshardError("layout carries %d fds for %d buffers" %
                                  (len(fds), len(buffers)))
            pending = collections.deque(fds)

            def open_host(i: int, pbytes: int, gbytes: int
                          ) -> Tuple[List[Any], _ViewFactory, _ViewFactory]:
                # Buffers open in order: buffer i's fds (params, grads) are
                # the next two. _mapped closes the fd it is given.
                pmap = _mapped(pending.popleft(), pbytes)
                gmap = _mapped(pending.popleft(), gbytes)
                return ([pmap, gmap],
                        lambda dt, n: torch.frombuffer(pmap, dtype=dt,
                                                       count=n),
                        lambda dt, n: torch.frombuffer(gmap, dtype=dt,
                                                       count=n))
            open_buffer = open_host
            kept: List[Any] = []
        else:
            close_fds(fds)
            pending = collections.deque()
            device = int(cuda)
            self._check_device(device)

            def open_device(i: int, pbytes: int, gbytes: int
                            ) -> Tuple[List[Any], _ViewFactory, _ViewFactory]:
                pdev = _cuda_ipc.DeviceBuffer(buffers[i]["param_ipc"], device,
                                              pbytes)
                gdev = _cuda_ipc.DeviceBuffer(buffers[i]["grad_ipc"], device,
                                              gbytes)
                return [pdev, gdev], _device_view(pdev), _device_view(gdev)
            open_buffer = open_device
            # Older device mappings stay open until close(): a view may
            # outlive a re-layout.
            kept = list(self._maps)
        index_of = {e["name"]: i for i, e in enumerate(self._spec["params"])}
        bucket_of: List[Optional[Tuple[int, int]]] = [None] * len(index_of)
        params_in: Dict[Tuple[int, int], int] = {}
        maps: List[Any] = []
        grads: List[torch.Tensor] = []
        views: List[Tuple[int, torch.nn.Parameter, torch.Tensor,
                          torch.Tensor]] = []
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
            close_fds(pending)
        main: List[Optional[torch.Tensor]] = [None] * len(index_of)
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
                    p.main_grad = grad  # type: ignore[attr-defined]
                    main[index] = grad
        # The old host mappings go once nothing refers to them.
        self._maps, self._grads = kept + maps, grads
        self._bucket_of, self._params_in, self._main = (bucket_of, params_in,
                                                        main)
        self._cuda = None if cuda is None else int(cuda)
        self._hook_params()

    def _check_device(self, device: int) -> None:
        for name, p in self._params.items():
            if p.device != torch.device("cuda", device):
                raise ZshardError("param '%s' is on %s; the daemon's buffers "
                                  "are on cuda:%d: move the model there "
                                  "first" % (name, p.device, device))
