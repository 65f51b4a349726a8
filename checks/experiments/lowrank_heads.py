r"""Low-rank LM heads (seed 000, §3.1, Figure 2 in miniature): the same backbone, the head W = AB.

A small causal Transformer (2 blocks, width 128, context 64) is trained on tinyshakespeare with a
byte-level BPE tokenizer trained here on the training split (V = 4,096). Its head is factored as
:math:`W = AB` with :math:`A \in \mathbb R^{V \times D}`, :math:`B \in \mathbb R^{D \times 128}` and
D = 2^i, so the logits are confined to a D-dimensional subspace and the logit gradient reaches the
backbone through rank D. The validation loss against tokens seen, per D, and the convergence
speed-up of the largest D over the smallest (how much sooner it reaches the smallest D's final
loss) are the paper's Figure 2 in miniature (it reports x16 for D = 4096 against D = 32 at 2B
parameters).

Control: the same runs on characters (V = 65), with D >= V, where W = AB has rank 65 whatever D is
and the essay predicts no effect of D.

Eq. 1 across training (seed 000, Appendix E and Figure 4, in miniature): at every evaluation of a BPE
run, the logit gradient G of the first validation batch (float64, from the model's final hidden
states and W = AB) and the destroyed share :math:`\lVert G - G\Pi\rVert_F / \lVert G\rVert_F`
with the cosine :math:`c = \lVert G\Pi\rVert_F / \lVert G\rVert_F`, :math:`\Pi` the projector on
col W. At the end of training, the same on each trained head beside two random heads of the same V
and rank D: a random subspace against the trained G, and a random head with its own synthetic batch
(:func:`rankwall.theory.compression.random_head_compression`); and the update-efficiency split of
:func:`rankwall.theory.compression.efficiency_split` on the trained head.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.companion.data import read_corpus
from rankwall.checks.run.outputs import peak_memory_mb, progress_bar, write_outputs
from rankwall.theory import compression as cp

WIDTH = 128
LAYERS = 2
HEADS = 4
CONTEXT = 64
BATCH = 32
STEPS = 400
EVAL_EVERY = 25
EVAL_BATCHES = 8
LEARNING_RATE = 3e-3
BPE_VOCABULARY = 4096
BPE_DIMENSIONS = (4, 16, 64, 128)
CHAR_DIMENSIONS = (128, 512)


NAME = "lowrank-heads"
SUMMARY = "a small Transformer on tinyshakespeare with W = AB, D = 2^i (seed 000, Figure 2)"


def bpe_ids(text: str, vocabulary: int, seed: int) -> tuple[np.ndarray, int]:
    """Token ids of ``text`` under a byte-level BPE trained on it here (no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocabulary, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    lines = text.splitlines(keepends=True)
    tokenizer.train_from_iterator(lines, trainer=trainer)
    ids = [i for encoding in tokenizer.encode_batch(lines) for i in encoding.ids]
    return np.asarray(ids, dtype=np.int64), tokenizer.get_vocab_size()


def char_ids(text: str) -> tuple[np.ndarray, int]:
    alphabet = sorted(set(text))
    index = {c: i for i, c in enumerate(alphabet)}
    return np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text)), len(alphabet)


def make_model(V: int, D: int, seed: int) -> Any:
    """Token and position embeddings, pre-norm Transformer blocks with a causal mask, a final norm,
    and the factored head :math:`h \\mapsto A(Bh)`."""
    import torch
    from torch import nn

    torch.manual_seed(seed)

    class LowRankLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(V, WIDTH)
            self.position = nn.Embedding(CONTEXT, WIDTH)
            layer = nn.TransformerEncoderLayer(
                WIDTH, HEADS, 4 * WIDTH, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
            )
            self.blocks = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(WIDTH)
            self.B = nn.Linear(WIDTH, D, bias=False)
            self.A = nn.Linear(D, V, bias=False)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(CONTEXT))

        def hidden(self, x: Any) -> Any:
            """The final hidden states (after the last norm), which the head maps to logits."""
            n = x.shape[1]
            h = self.embed(x) + self.position.weight[:n]
            return self.norm(self.blocks(h, mask=self.mask[:n, :n], is_causal=True))

        def forward(self, x: Any) -> Any:
            return self.A(self.B(self.hidden(x)))

    return LowRankLM()


def head_and_gradient(model: Any, x: Any, y: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The head W = AB (V x width), the hidden states H and the targets of a batch, in float64:
    the inputs of :func:`rankwall.theory.compression.logit_gradient_blocks`."""
    import torch

    with torch.no_grad():
        H = model.hidden(x).flatten(0, 1).double().numpy()
        W = (model.A.weight.double() @ model.B.weight.double()).numpy()
    return W, H, y.flatten().numpy()


def eq1_of(W: np.ndarray, G: np.ndarray) -> dict[str, float]:
    """Eq. 1's destroyed share and cosine of G through col W."""
    Q, _ = cp.column_basis(W)
    result = cp.compression([G], Q)
    return {"destroyed": result.destroyed, "cosine": result.cosine}


def final_heads(W: np.ndarray, G: np.ndarray, D: int, seed: int) -> dict[str, Any]:
    """At the end of training: Eq. 1 on the trained head, on a random head of the same V, width and
    rank D against the same G, and on a random V x D head with its own synthetic batch of as many
    tokens; and the update-efficiency split on the trained head."""
    V, width = W.shape
    split = cp.efficiency_split(G, W)
    own = cp.random_head_compression(V, D, G.shape[0], seed)
    return {
        "trained": eq1_of(W, G),
        "random_subspace_same_gradient": eq1_of(cp.construct_head(V, width, seed, rank=D), G),
        "random_head_own_batch": {"destroyed": own.destroyed, "cosine": own.cosine},
        "efficiency": {"total": split.total, "kernel": split.kernel, "anisotropy": split.anisotropy},
    }


def train(
    ids: np.ndarray,
    V: int,
    D: int,
    *,
    steps: int = STEPS,
    seed: int = 0,
    eq1: bool = False,
    on_eval: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """AdamW with a cosine schedule; validation loss (last 10% of the ids) every ``EVAL_EVERY`` steps,
    and with ``eq1`` Eq. 1 on the first validation batch's logit gradient at the same steps."""
    import torch

    split = int(0.9 * len(ids))
    train_ids, valid_ids = torch.as_tensor(ids[:split]), torch.as_tensor(ids[split:])
    generator = torch.Generator().manual_seed(seed + 1)

    def batch(source: Any, g: Any) -> tuple[Any, Any]:
        starts = torch.randint(len(source) - CONTEXT - 1, (BATCH,), generator=g)
        window = torch.stack([source[s : s + CONTEXT + 1] for s in starts.tolist()])
        return window[:, :-1], window[:, 1:]

    valid_batches = [batch(valid_ids, torch.Generator().manual_seed(seed + 2)) for _ in range(EVAL_BATCHES)]
    model = make_model(V, D, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))

    def validation_loss() -> float:
        model.eval()
        with torch.no_grad():
            total = sum(
                float(torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())) for x, y in valid_batches
            )
        model.train()
        return total / len(valid_batches)

    def gradient() -> tuple[np.ndarray, np.ndarray]:
        W, H, targets = head_and_gradient(model, *valid_batches[0])
        return W, np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))

    tokens_seen, losses, shares = [], [], []
    for step in range(1, steps + 1):
        x, y = batch(train_ids, generator)
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % EVAL_EVERY == 0:
            tokens_seen.append(step * BATCH * CONTEXT)
            losses.append(validation_loss())
            if eq1:
                shares.append(eq1_of(*gradient()))
            if on_eval is not None:
                on_eval()
    record = {"V": V, "D": D, "head_rank_bound": min(V, D, WIDTH), "tokens": tokens_seen, "valid_loss": losses}
    if eq1:
        record["eq1"] = {key: [s[key] for s in shares] for key in ("destroyed", "cosine")}
        record["final_heads"] = final_heads(*gradient(), D, seed)
    return record


def speedup(fast: dict[str, Any], slow: dict[str, Any]) -> float | None:
    """Tokens the slow run took to reach its final loss, over the tokens the fast run needed to
    reach it (None when the fast run never gets there)."""
    target = slow["valid_loss"][-1]
    for tokens, loss in zip(fast["tokens"], fast["valid_loss"], strict=True):
        if loss <= target:
            return slow["tokens"][-1] / tokens
    return None


def run(
    *,
    steps: int = STEPS,
    seed: int = 0,
    bpe_dimensions: tuple[int, ...] = BPE_DIMENSIONS,
    char_dimensions: tuple[int, ...] = CHAR_DIMENSIONS,
    on_eval: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Both sweeps; the records and each sweep's speed-up of its largest D over its smallest."""
    started = time.perf_counter()
    text = read_corpus("tinyshakespeare.txt")
    result: dict[str, Any] = {"steps": steps, "tokens_per_step": BATCH * CONTEXT}
    for name, (ids, V), dimensions in (
        ("bpe", bpe_ids(text, BPE_VOCABULARY, seed), bpe_dimensions),
        ("characters", char_ids(text), char_dimensions),
    ):
        # Eq. 1 on the BPE runs only: on characters rank W = V, col W is all of R^V and nothing is lost.
        runs = [train(ids, V, D, steps=steps, seed=seed, eq1=name == "bpe", on_eval=on_eval) for D in dimensions]
        result[name] = {"V": V, "runs": runs, "speedup_largest_over_smallest_D": speedup(runs[-1], runs[0])}
    result["seconds"] = time.perf_counter() - started
    result["peak_memory_mb"] = peak_memory_mb()
    return result


def evaluations(steps: int, runs: int) -> int:
    """How many times :func:`run` calls ``on_eval`` (for a progress bar)."""
    return runs * (steps // EVAL_EVERY)


def plot(result: dict[str, Any], path: Path) -> None:
    """Validation loss against tokens seen, per D (BPE, then the character control), and Eq. 1's
    cosine c of the BPE runs across training, with the random heads' c at the end (hollow marks)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(16, 4))
    for ax, name in zip(axes[:2], ("bpe", "characters"), strict=True):
        sweep = result[name]
        for r in sweep["runs"]:
            ax.plot(np.array(r["tokens"]) / 1e6, r["valid_loss"], marker=".", label=f"D = {r['D']}")
        factor = sweep["speedup_largest_over_smallest_D"]
        shown = f"x{factor:.2f}" if factor is not None else "not reached"
        ax.set(
            xlabel="tokens seen (millions)",
            ylabel="validation loss",
            title=f"{name}, V = {sweep['V']:,}: speed-up {shown}",
        )
        ax.legend(fontsize=8)
    ax = axes[2]
    for r in result["bpe"]["runs"]:
        tokens = np.array(r["tokens"]) / 1e6
        (line,) = ax.plot(tokens, r["eq1"]["cosine"], marker=".", label=f"D = {r['D']}, trained")
        final = r["final_heads"]
        for key, mark in (("random_subspace_same_gradient", "o"), ("random_head_own_batch", "s")):
            ax.plot(tokens[-1], final[key]["cosine"], mark, mfc="none", color=line.get_color())
    ax.set(
        xlabel="tokens seen (millions)",
        ylabel="cosine c = |G Pi| / |G|",
        yscale="log",
        title="Eq. 1 on the validation gradient (o: random subspace, same G; s: random head, own batch)",
    )
    ax.title.set_fontsize(8)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside the panel, off the data
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``lowrank_heads.json`` and ``lowrank_heads.png`` into ``out``."""
    return write_outputs(result, out, "lowrank_heads", plot)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps", type=integer_in(1, 1_000_000), default=STEPS, help=f"training steps (default {STEPS})"
    )


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment lowrank-heads``: run, write JSON and PNG, print a table (or the JSON)."""
    steps = args.steps
    runs = len(BPE_DIMENSIONS) + len(CHAR_DIMENSIONS)
    with progress_bar(err) as progress:
        task = progress.add_task("lowrank-heads: training", total=evaluations(steps, runs))
        result = run(steps=steps, seed=args.seed, on_eval=lambda: progress.advance(task))
    json_path, png_path = write(result, Path(args.out))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    table = Table(title=f"Low-rank heads W = AB: validation loss after {steps * result['tokens_per_step']:,} tokens")
    for column in ("tokens", "V", "D", "rank bound", "final validation loss"):
        table.add_column(column, justify="right")
    for name in ("bpe", "characters"):
        for r in result[name]["runs"]:
            table.add_row(name, f"{r['V']:,}", str(r["D"]), str(r["head_rank_bound"]), f"{r['valid_loss'][-1]:.4f}")
    out.print(table)
    eq1 = Table(title="Eq. 1 on the BPE runs' validation gradient: cosine c (destroyed share r = sqrt(1 - c²))")
    for column in ("D", "c first eval", "c final", "random subspace, same G", "random head, own batch", "1/c x aniso."):
        eq1.add_column(column, justify="right")
    for r in result["bpe"]["runs"]:
        final = r["final_heads"]
        eq1.add_row(
            str(r["D"]),
            f"{r['eq1']['cosine'][0]:.4f}",
            f"{r['eq1']['cosine'][-1]:.4f}",
            f"{final['random_subspace_same_gradient']['cosine']:.4f}",
            f"{final['random_head_own_batch']['cosine']:.4f}",
            f"{final['efficiency']['kernel']:.2f} x {final['efficiency']['anisotropy']:.2f}",
        )
    out.print(eq1)
    for name in ("bpe", "characters"):
        factor = result[name]["speedup_largest_over_smallest_D"]
        shown = f"x{factor:.2f}" if factor is not None else "never reached"
        out.print(f"{name}: largest D reaches the smallest D's final loss {shown} sooner")
    out.print(f"wrote {json_path} and {png_path}")
