"""The model-parallel demo's trainer (mp_toy, T = 2, P = 2): asks
its daemon where it sits, builds that slot's module, and trains it through
zshard with its replica's tensor and pipeline groups (torch.distributed,
gloo), one micro-batch per step: stage 0 sends its activations to stage 1
of the same tensor rank, stage 1 sends their gradient back.

    mp_trainer.py SOCKET OUT --log STEPS [--pause-after N
        --resume-file F]

Writes the slot's final params to OUT (torch.save) and one JSON line per
step to STEPS. Exit 0 at the job's end (a spare that was never placed
too), 3 on WorkerLost, 4 on JobFailed."""

import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import mp_toy
from zshard import JobFailed, WorkerLost
from zshard.model_parallel import Groups, wait_position
from zshard.torch import DistributedOptimizer


def pipeline_step(model, pos, groups, x, y):
    """Forward and backward of this slot for samples (x, y); the stage-1
    loss (None on stage 0)."""
    peer = groups.pp_ranks[1 - pos.pp_rank]
    if pos.pp_rank == 0:
        h = mp_toy.stage_forward(model, 0, x, groups.tp)
        dist.send(h.detach().contiguous(), peer)
        grad = torch.empty_like(h)
        dist.recv(grad, peer)
        h.backward(grad)
        return None
    h = torch.empty(x.shape[0], mp_toy.HIDDEN)
    dist.recv(h, peer)
    h.requires_grad_(True)
    out = mp_toy.stage_forward(model, 1, h, groups.tp)
    loss = ((out - y) ** 2).sum()
    loss.backward()
    dist.send(h.grad.contiguous(), peer)
    return loss.detach()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("socket")
    parser.add_argument("out")
    parser.add_argument("--log", required=True)
    parser.add_argument("--pause-after", type=int, default=0)
    parser.add_argument("--resume-file", default="")
    args = parser.parse_args()
    try:
        pos = wait_position(args.socket, timeout=60)
        if pos is None:
            return 0
        model = mp_toy.slot(pos.tp_rank, pos.pp_rank)
        opt = DistributedOptimizer(model, socket=args.socket, timeout=60)
        groups = Groups(timeout=datetime.timedelta(seconds=20))
        with open(args.log, "a") as log:
            while (info := opt.begin_step()) is not None:
                rebuilt = groups.update(info)
                x, y = mp_toy.batch(info.global_batch)
                mine = opt.samples(info)
                try:
                    loss = pipeline_step(model, pos, groups, x[mine], y[mine])
                except RuntimeError as err:  # a peer of the replica left
                    groups.abandon()
                    opt.discard_step(str(err))
                    loss = None
                result = opt.step(loss)
                log.write(json.dumps({
                    "step": result.step, "failed": result.failed,
                    "applied": result.applied,
                    "grad_norm": result.grad_norm, "loss": result.loss,
                    "rank": info.rank, "world": info.world,
                    "tp": info.tp_rank, "pp": info.pp_rank,
                    "replica": info.replica, "rebuilt": rebuilt,
                    "generation": info.model_parallel.generation}) + "\n")
                log.flush()
                if args.pause_after and result.step == args.pause_after:
                    while not os.path.exists(args.resume_file):
                        time.sleep(0.05)
        torch.save({k: v.detach().clone() for k, v in
                    model.state_dict().items()}, args.out)
        with open(args.out + ".slot", "w") as f:
            json.dump({"tp": pos.tp_rank, "pp": pos.pp_rank}, f)
        return 0
    except WorkerLost as e:
        print("worker lost: %s" % e, file=sys.stderr)
        return 3
    except JobFailed as e:
        print("job failed: %s" % e, file=sys.stderr)
        return 4


if __name__ == "__main__":
    sys.exit(main())
