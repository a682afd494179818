"""The demo's model and training loop: a character-level language model on
the GNU GPL version 3 as Debian's base-files ships it
(/usr/share/common-licenses/GPL-3), trained through zshard.

    python3 charlm.py [SOCKET] [--log FILE | --log-dir DIR] [--device cuda:N]
                      [--text FILE]           # one trainer per worker daemon
    python -m zshard.run --nproc 4 --spares 1 --job job.json charlm.py
                                              # all of it with one command
    python -m zshard.spec charlm:build_model  # the model the coordinator
                                              # takes from the first trainer

SOCKET defaults to $ZSHARD_TRAINER_SOCKET (zshard-run sets it). --log FILE
appends one JSON line per step; --log-dir DIR writes DIR/wI.steps (the
same lines) and DIR/wI.sample (the greedy continuation, instead of
printing it), I = $ZSHARD_LOCAL_RANK: one pair per trainer of zshard-run.

The model reads the CONTEXT characters before a position (an embedding of
each, concatenated), a two-layer MLP (Bengio et al. 2003) maps them to a
vector that the same embedding, transposed, turns into the next character's
logits (a tied input/output embedding). fp32 throughout.

The data is deterministic: sample b of step t is the window of SEQ + CONTEXT
characters starting at a position fixed by (t, b), the same on every rank,
so a re-shard changes which trainer computes a sample, never the sample.
"""

import argparse
import json
import os
import sys

import torch

TEXT = "/usr/share/common-licenses/GPL-3"
VOCAB = 128  # ASCII; any other byte reads as '?'
CONTEXT = 16  # characters the model sees before a position
SEQ = 32  # positions predicted per sample
WIDTH = 32  # embedding width
HIDDEN = 256
PROMPT_AT = 1200  # where the sample continuation's prompt starts


class CharLM(torch.nn.Module):

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.hidden = torch.nn.Linear(CONTEXT * WIDTH, HIDDEN)
        self.proj = torch.nn.Linear(HIDDEN, WIDTH)
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.out = torch.nn.Linear(WIDTH, VOCAB, bias=False)
        self.out.weight = self.embed.weight  # tied
        # Small initial logits: the first loss is near log(VOCAB).
        torch.nn.init.normal_(self.embed.weight, std=0.1)

    def forward(self, windows):
        """windows: [N, CONTEXT] character codes -> [N, VOCAB] logits."""
        e = self.embed(windows).flatten(1)
        h = self.norm(self.proj(torch.tanh(self.hidden(e))))
        return self.out(h)


def build_model():
    """The model every trainer starts from (same seed: same initial
    params on every rank, as zshard checks nothing about them)."""
    torch.manual_seed(0)
    return CharLM()


def load_text(path=TEXT):
    data = open(path, "rb").read()
    codes = torch.tensor(list(data), dtype=torch.long)
    return torch.where(codes < VOCAB, codes, torch.full_like(codes, ord("?")))


def sample(text, step, b, global_batch):
    """Inputs [SEQ, CONTEXT] and targets [SEQ] of sample b of step `step`:
    a window at a position fixed by (step, b)."""
    span = SEQ + CONTEXT
    g = torch.Generator().manual_seed(step * global_batch + b)
    start = int(torch.randint(0, text.numel() - span, (1,), generator=g))
    w = text[start:start + span]
    return w[:-1].unfold(0, CONTEXT, 1), w[CONTEXT:]


def summed_loss(model, text, step, samples, global_batch):
    """The SUM over this rank's samples of their summed cross-entropy (nats
    over SEQ characters each); zshard divides by the global batch."""
    if not samples:
        return torch.zeros(())
    xs, ys = zip(*(sample(text, step, b, global_batch) for b in samples))
    device = model.embed.weight.device
    logits = model(torch.cat(xs).to(device))
    return torch.nn.functional.cross_entropy(logits, torch.cat(ys).to(device),
                                             reduction="sum")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("socket", nargs="?", default=None,
                        help="the daemon's trainer socket (default "
                        "$ZSHARD_TRAINER_SOCKET, as zshard-run sets it)")
    parser.add_argument("--log", default=None,
                        help="append one JSON line per step here")
    parser.add_argument("--log-dir", default=None,
                        help="write DIR/wI.steps (one JSON line per step) "
                        "and DIR/wI.sample, I = $ZSHARD_LOCAL_RANK")
    parser.add_argument("--device", default="cpu",
                        help="where the model runs: cpu (default) or cuda:N, "
                        "the device of a daemon started with --device cuda:N")
    parser.add_argument("--text", default=TEXT,
                        help="the text to train on (default %(default)s)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    # zshard is imported here so that `python -m zshard.spec` needs only
    # build_model.
    import zshard
    from zshard.torch import DistributedOptimizer

    text = load_text(args.text)
    model = build_model().to(args.device)
    sample_path = None
    if args.log_dir:
        stem = os.path.join(args.log_dir, "w%s" % os.environ.get(
            "ZSHARD_LOCAL_RANK", "0"))
        args.log, sample_path = stem + ".steps", stem + ".sample"
    log = open(args.log, "a") if args.log else None
    try:
        with DistributedOptimizer(model, socket=args.socket) as opt:
            while (info := opt.begin_step()) is not None:
                loss = summed_loss(model, text, info.step, opt.samples(info),
                                   info.global_batch)
                loss.backward()
                result = opt.step(loss)
                if log:
                    log.write(json.dumps({
                        "step": result.step, "rank": info.rank,
                        "world": info.world, "lr": info.lr,
                        "failed": result.failed, "applied": result.applied,
                        "grad_norm": result.grad_norm,
                        "loss_per_char": (None if result.loss is None else
                                          result.loss / SEQ)}) + "\n")
                    log.flush()
    except zshard.WorkerLost as e:
        print("trainer: zshard.WorkerLost: %s" % e, file=sys.stderr)
        return 3
    # Detached: the model keeps its trained params.
    start = PROMPT_AT
    sample = generate(model, text[start:start + CONTEXT], 120)
    if sample_path:
        with open(sample_path, "w") as f:
            f.write(sample + "\n")
    else:
        print(sample)
    return 0


def generate(model, prompt, n):
    """Greedy continuation of `prompt` (CONTEXT codes) by n characters."""
    codes = prompt.tolist()
    with torch.no_grad():
        for _ in range(n):
            x = torch.tensor([codes[-CONTEXT:]],
                             device=model.embed.weight.device)
            codes.append(int(model(x).argmax()))
    return bytes(codes).decode("ascii", "replace")


if __name__ == "__main__":
    sys.exit(main())
