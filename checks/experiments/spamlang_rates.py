r"""SpamLang learning rates (seed 000, §3.2, Figure 3(b) in miniature): which rates converge at each V.

Seed 000 reports that on SpamLang the sensitivity to the learning rate grows with V, until no tested
rate converges. Here the SpamLang miniature of :mod:`rankwall.checks.experiments.spamlang` (the
current token's embedding, one residual MLP block, a rank-D head; D = 64, Adam, 512 tokens a step)
is trained by that module's own :func:`~rankwall.checks.experiments.spamlang.train` for every
(V, learning rate) of a grid, each pair one task: in process by default, or as Dask tasks with
``--workers N`` (a LocalCluster) or ``--scheduler ADDRESS`` (a running cluster).

A run *converges* when its final loss is below :data:`CONVERGED_SHARE` of log V (the loss of the
uniform guess it starts from). Per V the record gives the rates that converge, the lowest and the
highest, and their span in decades: the seed's claim is that this span narrows as V grows, until
it is empty. Every V gets the same number of steps, so a larger V also means fewer sightings of
each token (recorded per V), the confound of the loss sweep.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.arguments import integer_in, numbers_in
from rankwall.checks.cli.commands.common import cluster, cluster_options, on_cluster
from rankwall.checks.experiments import spamlang
from rankwall.checks.run.outputs import peak_memory_mb, progress_bar, write_outputs

NAME = "spamlang-rates"
SUMMARY = "SpamLang miniatures at every (V, learning rate) of a grid: which rates converge (seed 000, Figure 3(b))"

VOCABULARIES = (1024, 4096, 16384)
RATES = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
STEPS = spamlang.STEPS
#: A run converges when its final loss is below this share of log V (the uniform guess's loss).
CONVERGED_SHARE = 0.05
#: The vocabulary sizes ``--vocabularies`` accepts.
V_RANGE = (2, 1 << 20)
#: The learning rates ``--rates`` accepts (Adam's step; above 10 every run is noise).
RATE_RANGE = (0.0, 10.0)


def cpu_seconds() -> float:
    """CPU seconds of this process so far, every thread included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def finite(x: float) -> float | None:
    """``x``, or ``None`` for a loss that overflowed (JSON has no NaN)."""
    return x if math.isfinite(x) else None


def train_pair(
    V: int,
    rate: float,
    tied: bool,
    steps: int,
    seed: int,
    threads: int | None = None,
    on_log: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """One task: the SpamLang miniature at vocabulary ``V`` and learning rate ``rate``, its final loss
    and whether it converged. ``threads`` pins torch's threads (a Dask worker runs one task at a time)."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    cpu = cpu_seconds()
    record = spamlang.train(V, tied, steps=steps, seed=seed, lr=rate, on_log=on_log)
    final = finite(record["final_loss"])
    share = None if final is None else final / record["initial_loss_log_V"]
    return {
        "V": V,
        "learning_rate": rate,
        "D": record["D"],
        "tied": tied,
        "steps": steps,
        "logged_steps": record["steps"],
        "loss": [finite(x) for x in record["loss"]],
        "log_V": record["initial_loss_log_V"],
        "final_loss": final,
        "final_share_of_log_V": share,
        "converged": share is not None and share < CONVERGED_SHARE,
        "sightings_per_token": record["sightings_per_token"],
        "seconds": record["seconds"],
        "cpu_seconds": cpu_seconds() - cpu,
        "peak_memory_mb": record["peak_memory_mb"],
    }


def summary(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per V: the rates that converge, the lowest and highest, their span in decades, and the best rate."""
    rows = []
    for V in dict.fromkeys(r["V"] for r in records):
        runs = sorted((r for r in records if r["V"] == V), key=lambda r: r["learning_rate"])
        good = [r["learning_rate"] for r in runs if r["converged"]]
        finished = [r for r in runs if r["final_loss"] is not None]
        best = min(finished, key=lambda r: r["final_loss"]) if finished else None
        rows.append(
            {
                "V": V,
                "log_V": runs[0]["log_V"],
                "threshold_loss": CONVERGED_SHARE * runs[0]["log_V"],
                "sightings_per_token": runs[0]["sightings_per_token"],
                "rates_tried": len(runs),
                "converging_rates": good,
                "lowest_converging_rate": min(good) if good else None,
                "highest_converging_rate": max(good) if good else None,
                "converging_decades": float(np.log10(max(good) / min(good))) if good else None,
                "best_rate": None if best is None else best["learning_rate"],
                "best_final_loss": None if best is None else best["final_loss"],
            }
        )
    return rows


def pairs(vocabularies: tuple[int, ...], rates: tuple[float, ...]) -> list[tuple[int, float]]:
    """Every (V, learning rate) of the grid, V by V."""
    return [(V, rate) for V in vocabularies for rate in rates]


def run(
    vocabularies: tuple[int, ...] = VOCABULARIES,
    rates: tuple[float, ...] = RATES,
    *,
    tied: bool = False,
    steps: int = STEPS,
    seed: int = 0,
    client: Any = None,
    on_log: Callable[[], None] | None = None,
    on_task: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Every (V, rate) of the grid, in process (``on_log`` after each logged loss) or as one Dask task
    each on ``client`` (``on_task`` as each finishes); the records in grid order, then the summary per V.
    ``seconds`` is the wall time of the grid; ``cpu_seconds`` the CPU time of this process over it (every
    thread) in process, and on Dask the sum of the tasks' own CPU times (the workers' start-up aside)."""
    if not vocabularies or not rates:
        raise ValueError("the grid is empty")
    started, cpu = time.perf_counter(), cpu_seconds()
    todo = pairs(vocabularies, rates)
    if client is None:
        records = [train_pair(V, rate, tied, steps, seed, on_log=on_log) for V, rate in todo]
        used = cpu_seconds() - cpu
    else:
        from distributed import as_completed

        futures = client.map(
            train_pair,
            *zip(*todo, strict=True),
            tied=tied,
            steps=steps,
            seed=seed,
            threads=1,
            pure=False,
        )
        for _ in as_completed(futures):
            if on_task is not None:
                on_task()
        records = client.gather(futures)
        used = sum(r["cpu_seconds"] for r in records)
    return {
        "vocabularies": list(vocabularies),
        "rates": list(rates),
        "D": spamlang.D,
        "batch": spamlang.BATCH,
        "steps": steps,
        "tied": tied,
        "seed": seed,
        "criterion": f"final loss below {CONVERGED_SHARE} log V",
        "converged_share_of_log_V": CONVERGED_SHARE,
        "records": records,
        "by_V": summary(records),
        "where": "in process" if client is None else "dask",
        "seconds": time.perf_counter() - started,
        "cpu_seconds": used,
        "peak_memory_mb": max(peak_memory_mb(), *(r["peak_memory_mb"] for r in records)),
    }


def plot(result: dict[str, Any], path: Path) -> None:
    """Final loss / log V against the learning rate (log x), one line per V, the convergence line
    dashed; converged runs filled, the others hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(7, 4.5))
    for V in result["vocabularies"]:
        runs = sorted((r for r in result["records"] if r["V"] == V), key=lambda r: r["learning_rate"])
        x = [r["learning_rate"] for r in runs]
        y = [np.nan if r["final_share_of_log_V"] is None else r["final_share_of_log_V"] for r in runs]
        (line,) = ax.plot(x, y, marker="o", label=f"V = {V:,}")
        hollow = [(a, b) for a, b, r in zip(x, y, runs, strict=True) if not r["converged"] and np.isfinite(b)]
        if hollow:
            ax.scatter(
                *zip(*hollow, strict=True), marker="o", facecolors="white", edgecolors=line.get_color(), zorder=3
            )
    ax.axhline(result["converged_share_of_log_V"], color="grey", linestyle="--", linewidth=1)
    rates = result["rates"]
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="learning rate (Adam)",
        ylabel="final loss / log V",
        title=f"SpamLang, D = {result['D']}, {result['steps']} steps, {'tied' if result['tied'] else 'untied'} head",
    )
    ax.minorticks_off()
    ax.set_xticks(rates, [f"{r:g}" for r in rates])
    handles, labels = ax.get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color="grey", linestyle="--"))
    labels.append(f"converged below {result['converged_share_of_log_V']:g} log V (hollow: not)")
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``spamlang_rates.json`` and ``spamlang_rates.png`` into ``out``."""
    return write_outputs(result, out, "spamlang_rates", plot)


_vocabulary_list = numbers_in(int, *V_RANGE, what="V", name="grid")
_rate_list = numbers_in(float, *RATE_RANGE, what="rate", low_open=True, name="grid")


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(dict.fromkeys(_vocabulary_list(text)))


def _rates(text: str) -> tuple[float, ...]:
    return tuple(sorted(dict.fromkeys(_rate_list(text))))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--vocabularies",
        type=_sizes,
        default=VOCABULARIES,
        help="comma-separated vocabulary sizes (default: " + ",".join(map(str, VOCABULARIES)) + ")",
    )
    parser.add_argument(
        "--rates",
        type=_rates,
        default=RATES,
        help="comma-separated learning rates (default: " + ",".join(f"{r:g}" for r in RATES) + ")",
    )
    parser.add_argument(
        "--steps", type=integer_in(1, 1_000_000), default=STEPS, help=f"training steps per run (default {STEPS})"
    )
    parser.add_argument("--tied", action="store_true", help="tie the head to the embedding (default: untied)")
    cluster_options(parser)


def main(args: argparse.Namespace, out: Console, err: Console) -> None:
    """``rankwall experiment spamlang-rates``: train the grid, write JSON and PNG, print a table (or the JSON)."""
    grid = dict(vocabularies=args.vocabularies, rates=args.rates, tied=args.tied, steps=args.steps, seed=args.seed)
    tasks = len(args.vocabularies) * len(args.rates)
    if on_cluster(args):
        with cluster(args) as client, progress_bar(err) as progress:
            task = progress.add_task("spamlang-rates: tasks", total=tasks)
            result = run(**grid, client=client, on_task=lambda: progress.advance(task))
    else:
        with progress_bar(err) as progress:
            task = progress.add_task("spamlang-rates: training", total=tasks * spamlang.logs_per_run(args.steps))
            result = run(**grid, on_log=lambda: progress.advance(task))
    json_path, png_path = write(result, Path(args.out))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    table = Table(
        title=f"SpamLang: final loss / log V after {result['steps']} steps, D = {result['D']}, "
        f"{'tied' if result['tied'] else 'untied'}; * converged ({result['criterion']})"
    )
    table.add_column("V", justify="right")
    for rate in result["rates"]:
        table.add_column(f"lr {rate:g}", justify="right")
    table.add_column("converging rates", justify="right")
    for row in result["by_V"]:
        runs = {r["learning_rate"]: r for r in result["records"] if r["V"] == row["V"]}
        cells = [
            "diverged"
            if runs[rate]["final_share_of_log_V"] is None
            else f"{runs[rate]['final_share_of_log_V']:.3g}" + ("*" if runs[rate]["converged"] else "")
            for rate in result["rates"]
        ]
        good = row["converging_rates"]
        span = "none"
        if good:
            ends = f"{min(good):g}" if len(good) == 1 else f"{min(good):g}..{max(good):g}"
            span = f"{ends} ({len(good)} of {row['rates_tried']})"
        table.add_row(f"{row['V']:,}", *cells, span)
    out.print(table)
    out.print(
        f"{result['seconds']:.0f} s, {result['cpu_seconds']:.0f} CPU s ({result['where']}), "
        f"peak memory {result['peak_memory_mb']:.0f} MiB; wrote {json_path} and {png_path}"
    )
