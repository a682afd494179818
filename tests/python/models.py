"""Small PyTorch models for the Python tests (importable as
MODULE:FUNCTION by `python -m zshard.spec`)."""

import torch


class TiedLM(torch.nn.Module):
    """An embedding tied to the output layer, a LayerNorm and a hidden
    Linear: every kind of parameter the planner distinguishes."""

    def __init__(self, vocab=50, width=16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.hidden = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)
        self.out = torch.nn.Linear(width, vocab, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, tokens):
        return self.out(self.norm(torch.relu(self.hidden(self.embed(tokens)))))


def tied_lm():
    torch.manual_seed(0)
    return TiedLM()


def not_a_model():
    return 3


def token_batch(global_batch, length=8, vocab=50, seed=1234):
    """The job's data: sample b is (inputs x[b], next tokens y[b]), the same
    on every rank and every step (a tiny next-token task)."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (global_batch, length + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def summed_loss(model, x, y, samples):
    """The SUM of the samples' cross-entropy losses (zshard divides the
    summed gradient by the global batch)."""
    loss = torch.zeros(())
    for b in samples:
        logits = model(x[b])
        loss = loss + torch.nn.functional.cross_entropy(logits, y[b],
                                                        reduction="sum")
    return loss
