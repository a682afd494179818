"""A user's training loop through zshard, as the tests and the demo run it:
python3 trainer_main.py SOCKET OUT.pt [--steps-log FILE]

Trains models.tied_lm() on models.token_batch() with the global batch the
daemon gives, then writes the final params (torch.save of the state dict)
to OUT.pt when the job is done."""

import argparse
import json
import sys

import torch

import models
import zshard
from zshard.torch import DistributedOptimizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("socket")
    parser.add_argument("out")
    parser.add_argument("--log", default=None)
    args = parser.parse_args()
    model = models.tied_lm()
    log = open(args.log, "a") if args.log else None
    try:
        with DistributedOptimizer(model, socket=args.socket) as opt:
            while True:
                info = opt.begin_step()
                if info is None:
                    break
                x, y = models.token_batch(info.global_batch)
                loss = models.summed_loss(model, x, y, opt.samples(info))
                if loss.requires_grad:
                    loss.backward()
                result = opt.step(loss)
                if log:
                    log.write(json.dumps({
                        "step": result.step, "rank": info.rank,
                        "world": info.world, "lr": info.lr,
                        "applied": result.applied,
                        "failed": result.failed,
                        "grad_norm": result.grad_norm,
                        "loss": result.loss}) + "\n")
                    log.flush()
    except zshard.WorkerLost as e:
        print("trainer: %s" % e, file=sys.stderr)
        return 3
    torch.save(model.state_dict(), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
