r"""Do models that share D share Figure 6's curve? (seed 000, §3.4: Pythia 1B and 1.4B, in miniature).

Seed 000's Figure 6 moves the logits of a trained model by a fraction t of their norm along the
logit gradient :math:`-G` and along the move a step on the hidden states makes, :math:`-GWW^\top`, and
reports how many times more the first lowers the loss; two Pythia models that share D but differ in
size give the same curve. Here three of the project's small Transformers
(:mod:`rankwall.checks.models.tiny`) are trained on tinyshakespeare under the byte-level BPE of
:mod:`rankwall.checks.experiments.lowrank_heads` (V = 4,096, so D < V and the head binds): two that
share D = 128 but differ in depth (2 and 4 blocks: :data:`MODELS`), and a control at D = 64. At
:data:`CHECKPOINTS` each is measured on the same held-out batch: the loss changes along both directions
at :data:`FRACTIONS` (:func:`rankwall.theory.compression.loss_change_along`) and their first-order
ratio split into kernel and anisotropy (:func:`rankwall.theory.compression.efficiency_split`). The
curves *collapse* when the two D = 128 models' ratios lie closer to each other than to the control's:
the record gives, per checkpoint, the largest |log ratio| between the two and between each and the
control.
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
from rankwall.checks.experiments.lowrank_heads import BPE_VOCABULARY, bpe_ids
from rankwall.checks.models import tiny
from rankwall.checks.run.outputs import peak_memory_mb, progress_bar, write_outputs
from rankwall.theory import compression as cp

NAME = "efficiency-depth"
SUMMARY = "Figure 6's update-efficiency curve of models sharing D at two depths, beside one of another D (seed 000)"

#: (name, width D, blocks): the pair that shares D, and the control.
MODELS = (("D = 128, 2 blocks", 128, 2), ("D = 128, 4 blocks", 128, 4), ("D = 64, 2 blocks (control)", 64, 2))
HEADS_PER_BLOCK = 4
CONTEXT = 64
BATCH = 32
STEPS = 400
CHECKPOINTS = (100, 200, 400)
LEARNING_RATE = 1e-3
#: Held-out sequences whose logit gradient the curves are measured on.
HELD_OUT = 8
FRACTIONS = (1e-4, 1e-3, 1e-2, 1e-1)


def measure(model: Any, x: Any, y: Any) -> dict[str, Any]:
    """Figure 6 on one batch: the loss changes along -G and -GWW^T, their ratio, and the split."""
    import torch

    with torch.no_grad():
        H = model.hidden(x).flatten(0, 1).double().numpy()
    W = model.head.weight.detach().double().numpy()
    targets = y.flatten().numpy()
    changes = cp.loss_change_along(H, W, targets, FRACTIONS)
    G = np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))
    split = cp.efficiency_split(G, W)
    pairs = zip(changes["logit gradient"], changes["hidden-state update"], strict=True)
    ratio = [g / h if g < 0 and h < 0 else None for g, h in pairs]  # both lower the loss: how many times more
    return {
        "loss": cp.cross_entropy(H @ W.T, targets),
        "changes": changes,
        "ratio": ratio,
        "first_order": {"total": split.total, "kernel": split.kernel, "anisotropy": split.anisotropy},
    }


def train(
    ids: np.ndarray,
    V: int,
    width: int,
    blocks: int,
    *,
    steps: int,
    seed: int,
    on_step: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Train one model (AdamW, batches of BATCH x CONTEXT), measured at each checkpoint <= steps."""
    import torch

    split = int(0.9 * len(ids))
    config = tiny.TinyConfig(V=V, width=width, layers=blocks, heads=HEADS_PER_BLOCK, context=CONTEXT)
    model = tiny.make_tiny(config, seed)
    [(x_held, y_held)] = tiny.fixed_batches(ids[split:], CONTEXT, HELD_OUT, 1, seed + 2)
    stream = tiny.batches(ids[:split], CONTEXT, BATCH, seed + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    points = []
    for step in range(1, steps + 1):
        x, y = next(stream)
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step in CHECKPOINTS or step == steps:
            points.append({"step": step, **measure(model, x_held, y_held)})
        if on_step is not None:
            on_step()
    return {"width": width, "blocks": blocks, "parameters": tiny.parameter_count(config), "checkpoints": points}


def collapse(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per shared checkpoint: the largest |log ratio| over the fractions between the two D = 128 runs
    (``within_pair``) and between each of them and the control (``to_control``, the smaller of the two)."""

    def gap(a: dict[str, Any], b: dict[str, Any]) -> float:
        pairs = [(r, s) for r, s in zip(a["ratio"], b["ratio"], strict=True) if r and s]
        return max(abs(math.log(r / s)) for r, s in pairs) if pairs else float("nan")

    rows = []
    for i, point in enumerate(runs[0]["checkpoints"]):
        shallow, deep, control = (run["checkpoints"][i] for run in runs)
        rows.append(
            {
                "step": point["step"],
                "within_pair": gap(shallow, deep),
                "to_control": min(gap(shallow, control), gap(deep, control)),
            }
        )
    return rows


def run(*, steps: int = STEPS, seed: int = 0, on_step: Callable[[], None] | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    ids, V = bpe_ids(read_corpus("tinyshakespeare.txt"), BPE_VOCABULARY, seed)
    runs = [
        {"name": name, **train(ids, V, width, blocks, steps=steps, seed=seed, on_step=on_step)}
        for name, width, blocks in MODELS
    ]
    return {
        "V": V,
        "steps": steps,
        "fractions": list(FRACTIONS),
        "runs": runs,
        "collapse": collapse(runs),
        "seconds": time.perf_counter() - started,
        "peak_memory_mb": peak_memory_mb(),
    }


def plot(result: dict[str, Any], path: Path) -> None:
    """The ratio of loss decreases (-G over -GWW^T) against the step size, per model, at the last
    checkpoint, and the first-order ratio of each model against training steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(12, 4))
    for run in result["runs"]:
        last = run["checkpoints"][-1]
        fractions = [f for f, r in zip(result["fractions"], last["ratio"], strict=True) if r]
        axes[0].plot(fractions, [r for r in last["ratio"] if r], marker="o", label=run["name"])
        steps = [c["step"] for c in run["checkpoints"]]
        axes[1].plot(steps, [c["first_order"]["total"] for c in run["checkpoints"]], marker="o", label=run["name"])
    axes[0].set(
        xscale="log",
        yscale="log",
        xlabel="step size (fraction of the logits' norm)",
        ylabel="loss decrease along -G / along -GWW^T",
        title=f"after {result['steps']} steps, V = {result['V']:,}",
    )
    axes[1].set(xlabel="training step", ylabel="first-order ratio e_G / e_H", yscale="log", title="across training")
    for ax in axes:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    return write_outputs(result, out, "efficiency_depth", plot)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=integer_in(1, 1_000_000), default=STEPS, help="training steps per model")


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment efficiency-depth``: train the three models, measure, write JSON and PNG."""
    from rankwall.checks.experiments.attention_trajectory import threads

    with progress_bar(err) as progress, threads():
        task = progress.add_task("efficiency-depth: training", total=len(MODELS) * args.steps)
        result = run(steps=args.steps, seed=args.seed, on_step=lambda: progress.advance(task))
    json_path, png_path = write(result, Path(args.out))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    table = Table(title=f"Figure 6 in miniature: V = {result['V']:,}, ratio of loss decreases at t = {FRACTIONS[0]:g}")
    for column in ("model", "parameters", *(f"step {c['step']}" for c in result["runs"][0]["checkpoints"])):
        table.add_column(column, justify="right")
    for r in result["runs"]:
        table.add_row(r["name"], f"{r['parameters']:,}", *(f"{c['ratio'][0]:.1f}" for c in r["checkpoints"]))
    out.print(table)
    for c in result["collapse"]:
        out.print(
            f"step {c['step']}: largest |log ratio| within the D = 128 pair {c['within_pair']:.3f}, "
            f"to the D = 64 control {c['to_control']:.3f}"
        )
    out.print(f"wrote {json_path} and {png_path}")
