r"""SpamLang (seed 000, §3.2, Figure 3 in miniature): learning to repeat a token through a rank-D head.

A SpamLang sequence repeats one token drawn uniformly from the vocabulary, so after the first
position the next token is always the current one and the loss can be driven to 0 (Prop. A.4 with
the identity: a Transformer can copy its input). The paper trains a 106M-parameter Transformer with
D = 576; here the model is what the task needs and nothing more: the current token's embedding
E[x] (V x D), a residual MLP block, and the head W (V x D), tied (W = E) or not. Every position
after the first is a training pair (x, x), so a batch of sequences is a batch of uniform tokens.

For V from 1,024 to 131,072 at fixed D = 64, plus a control at V = D = 1,024, the loss against
steps shows whether the direction of the paper's finding holds: convergence gets harder as V grows
past D. At a fixed budget, larger V also
means fewer sightings per token; the record reports them so the two effects are not confused.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in
from rankwall.checks.run.outputs import peak_memory_mb, progress_bar, write_outputs

VOCABULARIES = (1024, 4096, 16384, 65536, 131072)
D = 64
STEPS = 150
BATCH = 512
LEARNING_RATE = 3e-3
LOG_EVERY = 10


NAME = "spamlang"
SUMMARY = "learning to repeat a token through a rank-D head, V = 1,024 to 131,072 (seed 000, Figure 3)"


def make_model(V: int, D: int, tied: bool, seed: int) -> Any:
    """Embedding, one residual MLP block with a final norm, and a rank-D head (tied or not)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)

    class Repeater(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(V, D)
            self.mlp = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
            self.norm = nn.LayerNorm(D)
            self.head = nn.Linear(D, V, bias=False)
            # Small initial weights (std 0.02, as in GPT-2 and Llama): a tied head at N(0, 1) would
            # start at the copy solution, since e_x . e_x ~ D dominates e_x . e_y ~ sqrt(D).
            nn.init.normal_(self.embed.weight, std=0.02)
            nn.init.normal_(self.head.weight, std=0.02)
            if tied:
                self.head.weight = self.embed.weight

        def forward(self, x: Any) -> Any:
            h = self.embed(x)
            return self.head(self.norm(h + self.mlp(h)))

    return Repeater()


def fit(
    V: int,
    tied: bool,
    *,
    D: int = D,
    steps: int = STEPS,
    seed: int = 0,
    lr: float = LEARNING_RATE,
    on_log: Callable[[], None] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Adam at learning rate ``lr`` on uniform tokens with target = input; the trained model and its
    record (the loss every ``LOG_EVERY`` steps)."""
    import torch

    started = time.perf_counter()
    model = make_model(V, D, tied, seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed + 1)
    losses, logged_steps = [], []
    for step in range(1, steps + 1):
        tokens = torch.randint(V, (BATCH,), generator=generator)
        loss = torch.nn.functional.cross_entropy(model(tokens), tokens)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % LOG_EVERY == 0 or step == 1:
            losses.append(float(loss.detach()))
            logged_steps.append(step)
            if on_log is not None:
                on_log()
    return model, {
        "V": V,
        "D": D,
        "tied": tied,
        "steps": logged_steps,
        "loss": losses,
        "initial_loss_log_V": float(np.log(V)),
        "final_loss": losses[-1],
        "sightings_per_token": steps * BATCH / V,
        "seconds": time.perf_counter() - started,
        "peak_memory_mb": peak_memory_mb(),
    }


def train(
    V: int,
    tied: bool,
    *,
    D: int = D,
    steps: int = STEPS,
    seed: int = 0,
    lr: float = LEARNING_RATE,
    on_log: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """The record of :func:`fit` (the loss every ``LOG_EVERY`` steps)."""
    return fit(V, tied, D=D, steps=steps, seed=seed, lr=lr, on_log=on_log)[1]


def run(
    vocabularies: tuple[int, ...] = VOCABULARIES,
    *,
    D: int = D,
    steps: int = STEPS,
    seed: int = 0,
    on_log: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Every vocabulary size at width D, tied and untied, then the control: the smallest V at
    D = V, where no bottleneck exists and each token is seen as often. One record per run."""
    runs = [(V, D, tied) for tied in (True, False) for V in vocabularies]
    runs += [(min(vocabularies), min(vocabularies), tied) for tied in (True, False)]
    records = []
    for V, width, tied in runs:
        record = train(V, tied, D=width, steps=steps, seed=seed, on_log=on_log)
        record["role"] = "control (D = V)" if width == V and width != D else "sweep"
        records.append(record)
    return records


def logs_per_run(steps: int) -> int:
    """How many times :func:`train` calls ``on_log`` (for a progress bar)."""
    return len([s for s in range(1, steps + 1) if s % LOG_EVERY == 0 or s == 1])


def plot(records: list[dict[str, Any]], path: Path) -> None:
    """Loss / log V against steps, one line per V, tied and untied side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, tied in zip(axes, (True, False), strict=True):
        for r in (r for r in records if r["tied"] == tied):
            style = ":" if r["role"] != "sweep" else "-"
            label = f"V = {r['V']:,}" + (f", D = {r['D']} (control)" if r["role"] != "sweep" else "")
            ax.plot(r["steps"], np.array(r["loss"]) / r["initial_loss_log_V"], style, label=label)
        ax.set(xlabel="step", title=f"SpamLang, D = {records[0]['D']}, {'tied' if tied else 'untied'} head")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3)  # below, off the data
    axes[0].set_ylabel("training loss / log V")
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def write(records: list[dict[str, Any]], out: Path) -> tuple[Path, Path]:
    """Write ``spamlang.json`` and ``spamlang.png`` into ``out``."""
    return write_outputs(records, out, "spamlang", plot)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps", type=integer_in(1, 1_000_000), default=STEPS, help=f"training steps (default {STEPS})"
    )


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment spamlang``: run, write JSON and PNG, print a table (or the JSON)."""
    steps = args.steps
    runs = 2 * len(VOCABULARIES) + 2
    with progress_bar(err) as progress:
        task = progress.add_task("spamlang: training", total=runs * logs_per_run(steps))
        records = run(steps=steps, seed=args.seed, on_log=lambda: progress.advance(task))
    json_path, png_path = write(records, Path(args.out))
    if args.json:
        print(json.dumps(records, indent=2))
        return
    table = Table(title=f"SpamLang: training loss after {steps} steps (log V at the start)")
    for column in ("V", "D", "head", "role", "log V", "final loss", "final / log V", "sightings per token"):
        table.add_column(column, justify="right")
    for r in records:
        table.add_row(
            f"{r['V']:,}",
            str(r["D"]),
            "tied" if r["tied"] else "untied",
            r["role"],
            f"{r['initial_loss_log_V']:.2f}",
            f"{r['final_loss']:.3g}",
            f"{r['final_loss'] / r['initial_loss_log_V']:.3f}",
            f"{r['sightings_per_token']:.2f}",
        )
    out.print(table)
    out.print(f"wrote {json_path} and {png_path}")
