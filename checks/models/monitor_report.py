r"""``rankwall monitor report``: a monitored run (:mod:`rankwall.monitor`'s JSON Lines) summarised and drawn.

The summary pools every record: the checks' counts (violations, undecided rows), the log-log fit of the
realised gain on :math:`2m(1-m)` over every row of every record (exact, from the records' summed
statistics), each head's trajectory (median m, median gain, previous-token share), the final ranking of
the heads by median gain, and the LM head's Eq. 1 shares. Two figures: ``trajectories.png`` (per head
against step, the scalars, Eq. 1) and ``gain_vs_capacity.png`` (the sampled rows and per-head medians
on log axes, the fitted line and the bound gain = 2m(1 - m)).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rankwall.monitor import CHECKS, fit_from_sums

#: Heads drawn in colour in the trajectories (the others in grey): the most confident at the end.
HIGHLIGHTED = 6


def _head_key(head: dict[str, Any]) -> tuple[int, int]:
    return head["layer"], head["head"]


def trajectories(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per head (in layer, head order): its module and, per record, the step, median m, median gain,
    capacity at the median m and previous-token share."""
    heads: dict[tuple[int, int], dict[str, Any]] = {}
    for record in records:
        for head in record["attention"]["heads"]:
            entry = heads.setdefault(
                _head_key(head),
                {"layer": head["layer"], "head": head["head"], "module": head["module"], "steps": []}
                | {k: [] for k in ("median_m", "median_gain", "capacity_at_median_m", "previous_token_share")},
            )
            entry["steps"].append(record["step"])
            for key in ("median_m", "median_gain", "capacity_at_median_m", "previous_token_share"):
                entry[key].append(head[key])
    return [heads[k] for k in sorted(heads)]


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The run in one object: checks, the pooled fit, trajectories, the final head ranking, Eq. 1."""
    checks = {}
    for check in CHECKS:
        parts = [r["checks"][check] for r in records]
        close = [c["closest_margin_in_tolerances"] for c in parts if c["closest_margin_in_tolerances"] is not None]
        checks[check] = {k: sum(c[k] for c in parts) for k in ("rows", "holds", "violated", "undecided")}
        checks[check]["closest_margin_in_tolerances"] = min(close) if close else None
    last = records[-1]["attention"]["heads"]
    ranked = sorted((h for h in last if h["median_gain"] is not None), key=lambda h: h["median_gain"])
    lm = [(r["step"], r["lm_head"]) for r in records if r.get("lm_head")]
    return {
        "records": len(records),
        "steps": [r["step"] for r in records],
        "rows": sum(r["attention"]["rows"] for r in records),
        "violations": sum(r["violations"] for r in records),
        "undecided": sum(r["undecided"] for r in records),
        "violations_per_record": [r["violations"] for r in records],
        "undecided_per_record": [r["undecided"] for r in records],
        "checks": checks,
        "fit_all_rows": fit_from_sums(h["fit"] for r in records for h in r["attention"]["heads"]),
        "fit_last_record": records[-1]["attention"]["fit"],
        "fused_attention_calls": sum(r["attention"]["fused_attention_calls"] for r in records),
        "ranking_last_record": [
            {k: h[k] for k in ("layer", "head", "median_m", "median_gain", "previous_token_share")} for h in ranked
        ],
        "heads": trajectories(records),
        "scalars": {
            key: [[r["step"], r["scalars"][key]] for r in records if key in r["scalars"]]
            for key in sorted({k for r in records for k in r["scalars"]})
        },
        "lm_head": {
            "steps": [s for s, _ in lm],
            "destroyed": [x["destroyed"] for _, x in lm],
            "cosine": [x["cosine"] for _, x in lm],
            "gradient_rank_lower": [x["gradient_rank_lower"] for _, x in lm],
        },
    }


def _highlighted(heads: list[dict[str, Any]]) -> set[tuple[int, int]]:
    final = [(h["median_m"][-1] or 0.0, _head_key(h)) for h in heads]
    return {key for _, key in sorted(final, reverse=True)[:HIGHLIGHTED]}


def plot_trajectories(summary: dict[str, Any], path: Path) -> None:
    """Per head against step: median m, previous-token share, median gain (log); then the logged
    scalars, Eq. 1's destroyed share and cosine, and the rows violated or undecided per record."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 3, figsize=(16, 8))
    shown = _highlighted(summary["heads"])
    for ax, key, label in (
        (axes[0, 0], "median_m", "median largest probability m"),
        (axes[0, 1], "previous_token_share", "previous-token share"),
        (axes[0, 2], "median_gain", "median realised gain"),
    ):
        for head in summary["heads"]:
            values = np.array([np.nan if v is None else v for v in head[key]], dtype=float)
            if _head_key(head) in shown:
                ax.plot(head["steps"], values, marker=".", label=f"layer {head['layer']} head {head['head']}")
            else:
                ax.plot(head["steps"], values, color="0.8", linewidth=0.8)
        ax.set(xlabel="step", ylabel=label, title=label)
    axes[0, 2].set_yscale("log")
    axes[0, 2].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    for key, points in summary["scalars"].items():
        steps, values = zip(*points, strict=True)
        axes[1, 0].plot(steps, values, marker=".", label=key)
    axes[1, 0].set(xlabel="step", title="logged scalars")
    if summary["scalars"]:
        axes[1, 0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    lm = summary["lm_head"]
    if lm["steps"]:
        axes[1, 1].plot(lm["steps"], lm["destroyed"], marker=".", label="destroyed share r")
        axes[1, 1].plot(lm["steps"], lm["cosine"], marker=".", label="cosine c")
        axes[1, 1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    axes[1, 1].set(xlabel="step", ylim=(-0.05, 1.05), title="LM head, Eq. 1")
    axes[1, 2].plot(summary["steps"], summary["violations_per_record"], "o-", color="tab:red", label="violated")
    axes[1, 2].plot(summary["steps"], summary["undecided_per_record"], "s:", color="tab:orange", label="undecided")
    axes[1, 2].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    axes[1, 2].set(
        xlabel="step",
        ylabel="rows",
        title=f"violations {summary['violations']}, undecided {summary['undecided']} "
        f"of {summary['checks']['jacobian_bounds']['rows']:,} rows",
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)


def plot_gain(records: list[dict[str, Any]], summary: dict[str, Any], path: Path) -> None:
    """Realised gain against 2m(1 - m) on log axes: the sampled rows (coloured by step), each head's
    median per record, the pooled fit and the ceiling gain = 2m(1 - m)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(7, 5.5))
    steps = np.array([r["step"] for r in records], dtype=float)
    norm = matplotlib.colors.Normalize(steps.min(), max(steps.max(), steps.min() + 1))
    for record in records:
        capacity = [c for h in record["attention"]["heads"] for c in h["sample"]["capacity"]]
        gain = [g for h in record["attention"]["heads"] for g in h["sample"]["gain"]]
        colour = plt.cm.viridis(norm(record["step"]))
        ax.scatter(capacity, gain, s=2, color=colour, alpha=0.3, linewidths=0)
    medians = [
        (h["capacity_at_median_m"], h["median_gain"])
        for r in records
        for h in r["attention"]["heads"]
        if h["median_gain"] and h["capacity_at_median_m"]
    ]
    if medians:
        ax.scatter(*zip(*medians, strict=True), s=10, color="black", label="a head's median, per record")
    fit = summary["fit_all_rows"]
    shown = [c for r in records for h in r["attention"]["heads"] for c in h["sample"]["capacity"]]
    grid = np.logspace(np.log10(min(shown, default=1e-6)), np.log10(0.5), 50)
    ax.plot(grid, grid, ":", color="grey", label="ceiling: gain = 2m(1 - m)")
    if fit["slope"] is not None:
        label = f"fit over {fit['rows']:,} rows: {fit['constant']:.3g} (2m(1 - m))^{fit['slope']:.3f}"
        ax.plot(grid, fit["constant"] * grid ** fit["slope"], color="tab:red", label=label)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="2m(1 - m)",
        ylabel="realised gain |g_z| / |g_p|",
        title="gain against capacity (points: sampled rows, colour: step)",
    )
    figure.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap="viridis"), ax=ax, label="step")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.15))
    figure.tight_layout()
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
