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
