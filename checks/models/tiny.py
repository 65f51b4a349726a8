r"""The project's own small Transformer: seed 002's character-level model, and what the miniatures train.

Seed 002's model ("Data": 816,128 parameters; four blocks, four heads, width 128, context 64, character
level, a uniform guess at 4.174 nats = log 65) is a pre-norm GPT: token and learned position
embeddings, blocks of (LayerNorm, causal self-attention, LayerNorm, GELU MLP of width 4 x 128), a final
LayerNorm and an untied head. With attention projections without bias, MLP and LayerNorm with bias and
V = 65 that is exactly 816,128 parameters (:func:`parameter_count`, tested); the seed does not list its
layers, so that split is our reconstruction from the count.

The attention is written out, :math:`p = \operatorname{softmax}(qk^\top/\sqrt{d} + \text{mask})` with
``torch.softmax`` over the last dimension of a (batch, heads, queries, keys) tensor, so that
:mod:`rankwall.monitor` sees its probabilities and their gradients. Each attention module takes an
intervention (:meth:`Attention.intervene`): zero a head's output, or replace its attention pattern by
a fixed one (the shift-by-one permutation), for the ablations of seed 002.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rankwall.theory.validation import InputError

#: Seed 002's model ("Data"): four blocks, four heads, width 128, context 64.
SEED_LAYERS, SEED_HEADS, SEED_WIDTH, SEED_CONTEXT = 4, 4, 128, 64
#: Its parameter count, as the seed states it.
SEED_PARAMETERS = 816_128
#: Interventions on one head (:meth:`Attention.intervene`).
INTERVENTIONS = ("zero", "shift")


@dataclass(frozen=True)
class TinyConfig:
    """Sizes of a :func:`make_tiny` model (seed 002's by default, for a vocabulary of V tokens)."""

    V: int
    width: int = SEED_WIDTH
    layers: int = SEED_LAYERS
    heads: int = SEED_HEADS
    context: int = SEED_CONTEXT

    def __post_init__(self) -> None:
        for name in ("V", "width", "layers", "heads", "context"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise InputError(f"{name}: {getattr(self, name)!r} is out of range (need an integer >= 1)")
        if self.width % self.heads:
            raise InputError(f"heads: width {self.width} is not a multiple of {self.heads} heads")


def parameter_count(config: TinyConfig) -> int:
    """Parameters of :func:`make_tiny` in closed form: embeddings :math:`(V + T)w`, per block
    :math:`4w^2` (attention, no bias) :math:`+ 8w^2 + 5w` (MLP with bias) :math:`+ 4w` (two
    LayerNorms), the final LayerNorm :math:`2w` and the head :math:`Vw`."""
    w, V = config.width, config.V
    return (V + config.context) * w + config.layers * (12 * w * w + 9 * w) + 2 * w + V * w


def make_tiny(config: TinyConfig, seed: int = 0) -> Any:
    """A fresh model under ``torch.manual_seed(seed)`` (GPT-2's initialisation: normal, std 0.02)."""
    import torch
    from torch import nn

    class Attention(nn.Module):
        """Causal multi-head self-attention with its probabilities computed explicitly."""

        def __init__(self) -> None:
            super().__init__()
            self.heads, self.head_width = config.heads, config.width // config.heads
            self.qkv = nn.Linear(config.width, 3 * config.width, bias=False)
            self.out = nn.Linear(config.width, config.width, bias=False)
            mask = torch.full((config.context, config.context), float("-inf")).triu(1)
            self.register_buffer("mask", mask, persistent=False)
            self.interventions: dict[int, str] = {}

        def forward(self, x: Any) -> Any:
            B, T, _ = x.shape
            q, k, v = self.qkv(x).view(B, T, 3, self.heads, self.head_width).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_width) + self.mask[:T, :T]
            p = torch.softmax(scores, dim=-1)
            if self.interventions:
                p = self._intervened(p)
            y = p @ v
            if self.interventions:
                keep = torch.ones(self.heads, 1, 1, dtype=y.dtype)
                for head, kind in self.interventions.items():
                    if kind == "zero":
                        keep[head] = 0
                y = y * keep
            return self.out(y.transpose(1, 2).reshape(B, T, -1))

        def _intervened(self, p: Any) -> Any:
            """``p`` with the shifted heads' rows replaced by the shift-by-one pattern (query i reads
            key i - 1, the first query itself)."""
            shifted = [h for h, kind in self.interventions.items() if kind == "shift"]
            if not shifted:
                return p
            T = p.shape[-1]
            pattern = torch.zeros(T, T, dtype=p.dtype)
            pattern[torch.arange(T), (torch.arange(T) - 1).clamp(min=0)] = 1
            p = p.clone()
            p[:, shifted] = pattern
            return p

        @contextlib.contextmanager
        def intervene(self, head: int, kind: str) -> Iterator[None]:
            """Inside the block, head ``head`` outputs 0 (``zero``) or attends by the fixed shift-by-one
            pattern (``shift``)."""
            if kind not in INTERVENTIONS:
                raise InputError(f"intervention: {kind!r} is not one of {', '.join(INTERVENTIONS)}")
            if not 0 <= head < self.heads:
                raise InputError(f"head: {head} is out of range (the layer has {self.heads} heads)")
            self.interventions[head] = kind
            try:
                yield
            finally:
                self.interventions.pop(head, None)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(config.width), nn.LayerNorm(config.width)
            self.attention = Attention()
            self.mlp = nn.Sequential(
                nn.Linear(config.width, 4 * config.width), nn.GELU(), nn.Linear(4 * config.width, config.width)
            )

        def forward(self, x: Any) -> Any:
            x = x + self.attention(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class Tiny(nn.Module):
        """Seed 002's architecture; ``hidden(x)`` gives the final hidden states, ``head`` the logits."""

        def __init__(self) -> None:
            super().__init__()
            self.config = config
            self.embed = nn.Embedding(config.V, config.width)
            self.position = nn.Embedding(config.context, config.width)
            self.blocks = nn.ModuleList(Block() for _ in range(config.layers))
            self.norm = nn.LayerNorm(config.width)
            self.head = nn.Linear(config.width, config.V, bias=False)

        def hidden(self, x: Any) -> Any:
            h = self.embed(x) + self.position.weight[: x.shape[1]]
            for block in self.blocks:
                h = block(h)
            return self.norm(h)

        def forward(self, x: Any) -> Any:
            return self.head(self.hidden(x))

    torch.manual_seed(seed)
    model = Tiny()
    for name, parameter in model.named_parameters():
        if parameter.dim() >= 2:
            nn.init.normal_(parameter, std=0.02)
        elif name.endswith("bias"):
            nn.init.zeros_(parameter)
    return model


def batches(ids: np.ndarray, context: int, batch: int, seed: int) -> Iterator[tuple[Any, Any]]:
    """Endless training batches: ``batch`` random windows of ``context + 1`` ids, inputs and next tokens,
    drawn by a torch generator seeded with ``seed`` (the model's own seed is not touched)."""
    import torch

    source = torch.as_tensor(ids)
    if len(source) <= context + 1:
        raise InputError(f"text: {len(source)} tokens, need more than context + 1 = {context + 1}")
    generator = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(len(source) - context - 1, (batch,), generator=generator)
        window = torch.stack([source[s : s + context + 1] for s in starts.tolist()])
        yield window[:, :-1], window[:, 1:]


def fixed_batches(ids: np.ndarray, context: int, batch: int, count: int, seed: int) -> list[tuple[Any, Any]]:
    """``count`` batches drawn once (held-out evaluation on the same windows every time)."""
    stream = batches(ids, context, batch, seed)
    return [next(stream) for _ in range(count)]


def mean_loss(model: Any, evaluation: list[tuple[Any, Any]]) -> float:
    """The mean cross-entropy (nats per token) of ``model`` over the batches, in eval mode, no gradient."""
    import torch

    was_training = model.training
    model.eval()
    with torch.no_grad():
        total = sum(
            float(torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())) for x, y in evaluation
        )
    model.train(was_training)
    return total / len(evaluation)
