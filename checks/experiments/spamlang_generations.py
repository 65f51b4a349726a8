r"""SpamLang generations (seed 000, §3.2, Table 1 in miniature): how long a trained model repeats a token.

Seed 000's Table 1 seeds each SpamLang model with a single token and samples at temperature 0.9: as V
grows past D the models fail, and "the repetition mechanism is only partially learned, as models
sometimes repeat tokens for a few steps only". Here the SpamLang miniatures of
:mod:`rankwall.checks.experiments.spamlang` (the current token's embedding, one residual MLP block, a
rank-D head; D = 64, 150 steps of Adam) are trained afresh at each V, tied and untied, and each is
seeded with :data:`PROMPTS` tokens drawn uniformly and sampled for :data:`LENGTH` steps at temperature
0.9. Per V: the run length (how many steps the seed token is continued before the first other token,
at most LENGTH), the share of runs that never stop, the share that stop at once, and the share of
correct predictions (a SpamLang continuation repeats the token before it). The miniature sees only the
current token, so a run ends at step k with probability :math:`q^{k-1}(1 - q)`, q the probability the
model gives the seed token after itself at temperature 0.9: the mean run length is
:math:`\sum_{k=1}^{L} q^k`, computed from the model's own q beside the sampled mean (a check of the
sampler).
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

from rankwall.checks.cli.arguments import integer_in, numbers_in
from rankwall.checks.experiments import spamlang
from rankwall.checks.run.outputs import cpu_seconds, peak_memory_mb, progress_bar, write_outputs

NAME = "spamlang-generations"
SUMMARY = "SpamLang miniatures seeded with one token and sampled at temperature 0.9, per V (seed 000, Table 1)"

#: The loss sweep's V up to 16,384. Past it 150 steps of 512 tokens show each token about once (V =
#: 65,536) or not at all (131,072), and those two would take about five times the rest's CPU: a run
#: that wants them names them (``--vocabularies``).
VOCABULARIES = (1024, 4096, 16384)
PROMPTS = 256
LENGTH = 32
TEMPERATURE = 0.9


def generate(model: Any, V: int, *, prompts: int = PROMPTS, length: int = LENGTH, seed: int = 0) -> dict[str, Any]:
    """Seed ``prompts`` uniform tokens, sample ``length`` steps at :data:`TEMPERATURE` (each step sees the
    last token only, as the model does); run lengths, stop shares, correct predictions, and the mean
    run length predicted from the model's own probability of repeating each seed."""
    import torch

    generator = torch.Generator().manual_seed(seed + 7)
    current = torch.randint(V, (prompts,), generator=generator)
    first = current.clone()
    alive = torch.ones(prompts, dtype=torch.bool)
    run = torch.zeros(prompts, dtype=torch.int64)
    correct = 0
    with torch.no_grad():
        repeat = torch.softmax(model(first) / TEMPERATURE, dim=-1).gather(1, first[:, None])[:, 0].double().numpy()
        for _ in range(length):
            probabilities = torch.softmax(model(current) / TEMPERATURE, dim=-1)
            nxt = torch.multinomial(probabilities, 1, generator=generator)[:, 0]
            same = nxt == current
            correct += int(same.sum())
            alive &= nxt == first
            run += alive.long()
            current = nxt
    runs = run.numpy()
    expected = np.array([sum(q**k for k in range(1, length + 1)) for q in repeat])
    return {
        "prompts": prompts,
        "length": length,
        "temperature": TEMPERATURE,
        "mean_run": float(runs.mean()),
        "median_run": float(np.median(runs)),
        "never_stops": float(np.mean(runs == length)),
        "stops_at_once": float(np.mean(runs == 0)),
        "correct_share": correct / (prompts * length),
        "mean_repeat_probability": float(repeat.mean()),
        "expected_mean_run": float(expected.mean()),
        "run_histogram": np.bincount(runs, minlength=length + 1).tolist(),
    }


def run(
    vocabularies: tuple[int, ...] = VOCABULARIES,
    *,
    steps: int = spamlang.STEPS,
    prompts: int = PROMPTS,
    seed: int = 0,
    on_run: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Each V at D = 64, tied and untied: train, then generate."""
    started, cpu = time.perf_counter(), cpu_seconds()
    records = []
    for tied in (True, False):
        for V in vocabularies:
            model, trained = spamlang.fit(V, tied, steps=steps, seed=seed)
            sample = generate(model, V, prompts=prompts, seed=seed)
            records.append({"V": V, "D": spamlang.D, "tied": tied, "final_loss": trained["final_loss"], **sample})
            if on_run is not None:
                on_run()
    return {
        "steps": steps,
        "records": records,
        "seconds": time.perf_counter() - started,
        "cpu_seconds": cpu_seconds() - cpu,
        "peak_memory_mb": peak_memory_mb(),
    }


def plot(result: dict[str, Any], path: Path) -> None:
    """Mean run length (sampled and from the model's q) and the share of correct predictions against V."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    for tied, marker in ((True, "o"), (False, "s")):
        rows = [r for r in result["records"] if r["tied"] == tied]
        V = [r["V"] for r in rows]
        label = "tied" if tied else "untied"
        axes[0].plot(V, [r["mean_run"] for r in rows], marker=marker, label=f"{label}, sampled")
        axes[0].plot(
            V, [r["expected_mean_run"] for r in rows], ":", marker=marker, mfc="none", label=f"{label}, from q"
        )
        axes[1].plot(V, [r["correct_share"] for r in rows], marker=marker, label=label)
    length = result["records"][0]["length"]
    axes[0].set(
        xscale="log",
        xlabel="V",
        ylabel=f"steps the seed token is repeated (of {length})",
        title="run length at temperature 0.9",
    )
    axes[1].set(
        xscale="log",
        xlabel="V",
        ylabel="share of correct predictions",
        ylim=(-0.02, 1.02),
        title="SpamLang continuations that repeat the token before",
    )
    for ax in axes:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    return write_outputs(result, out, "spamlang_generations", plot)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=integer_in(1, 1_000_000), default=spamlang.STEPS, help="training steps")
    parser.add_argument("--prompts", type=integer_in(1, 1_000_000), default=PROMPTS, help="seed tokens per model")
    parser.add_argument(
        "--vocabularies",
        type=_sizes,
        default=VOCABULARIES,
        help="comma-separated vocabulary sizes (default: " + ",".join(map(str, VOCABULARIES)) + ")",
    )


_sizes = numbers_in(int, 2, 1 << 20, what="V")


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment spamlang-generations``: train, generate, write JSON and PNG, print a table."""
    with progress_bar(err) as progress:
        task = progress.add_task("spamlang-generations: training", total=2 * len(args.vocabularies))
        result = run(
            args.vocabularies,
            steps=args.steps,
            prompts=args.prompts,
            seed=args.seed,
            on_run=lambda: progress.advance(task),
        )
    json_path, png_path = write(result, Path(args.out))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    table = Table(title=f"SpamLang generations: {PROMPTS} seed tokens, {LENGTH} steps at temperature {TEMPERATURE}")
    for column in ("V", "head", "final loss", "mean run", "from q", "never stops", "stops at once", "correct"):
        table.add_column(column, justify="right")
    for r in result["records"]:
        table.add_row(
            f"{r['V']:,}",
            "tied" if r["tied"] else "untied",
            f"{r['final_loss']:.3f}",
            f"{r['mean_run']:.1f}",
            f"{r['expected_mean_run']:.1f}",
            f"{r['never_stops']:.0%}",
            f"{r['stops_at_once']:.0%}",
            f"{r['correct_share']:.0%}",
        )
    out.print(table)
    out.print(f"wrote {json_path} and {png_path}; {result['seconds']:.0f} s, {result['cpu_seconds']:.0f} s CPU")
