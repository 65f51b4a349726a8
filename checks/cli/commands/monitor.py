"""``rankwall monitor report RUN.jsonl --out DIR``: a run recorded by :mod:`rankwall.monitor`, summarised and drawn."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rankwall.checks.cli.commands.common import (
    EXIT_CODES_TEXT,
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_VIOLATED,
    HelpFormatter,
)

NAME = "monitor"
HELP = "a training run recorded by rankwall.monitor: `rankwall monitor report RUN.jsonl --out DIR`"
ORDER = 9
#: Heads printed in the ranking (report.json has them all).
SHOWN = 12
DESCRIPTION = """\
rankwall.monitor records, at the steps one chooses, seed 002's attention quantities per head (median
largest probability m, realised gain |g_z|/|g_p| against 2m(1 - m), previous-token share, row sums of
the logit gradient) and Eq. 1 of the LM head, each row checked against the theorems, into a JSON Lines
file. `report` reads it, writes report.json, trajectories.png and gain_vs_capacity.png into --out and
prints the checks and the heads ranked by gain. Exit 0 when every checked row holds, 1 when one is
violated, 3 when none is but some are undecided (within rounding).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=type(parser))
    report = actions.add_parser(
        "report",
        help="summarise and draw a run",
        description="Summarise a monitored run and draw its trajectories and the gain against 2m(1 - m).",
        epilog=EXIT_CODES_TEXT,
        formatter_class=HelpFormatter,
    )
    report.set_defaults(parser=report)
    report.add_argument("run", metavar="RUN.jsonl", help="the JSON Lines file a Monitor wrote")
    report.add_argument("--out", default="monitor-report", help="folder for report.json and the two PNGs")
    report.add_argument("--json", action="store_true", help="print the summary as JSON")
    report.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from rankwall.checks.models import monitor_report
    from rankwall.checks.run.outputs import writable_folder, write_figure, write_text
    from rankwall.monitor import read_run

    records = read_run(args.run, "RUN.jsonl")
    folder = writable_folder(args.out, "--out")
    summary = monitor_report.summarise(records)
    for name, draw in (
        ("trajectories.png", lambda path: monitor_report.plot_trajectories(summary, path)),
        ("gain_vs_capacity.png", lambda path: monitor_report.plot_gain(records, summary, path)),
    ):
        write_figure(folder / name, draw)
    write_text(folder / "report.json", json.dumps(summary, indent=2))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print(summary, Path(args.run), folder, out)
    return exit_code(summary)


def exit_code(summary: dict) -> int:
    """1 when a checked row is violated, else 3 when one is undecided, else 0."""
    if summary["violations"]:
        return EXIT_VIOLATED
    return EXIT_INCONCLUSIVE if summary["undecided"] else EXIT_OK


def _print(summary: dict, run: Path, folder: Path, out: Console) -> None:
    checks = Table(title=f"{run}: {summary['records']} records, steps {summary['steps'][0]}..{summary['steps'][-1]}")
    for column in ("check", "rows", "holds", "violated", "undecided", "closest margin (tolerances)"):
        checks.add_column(column, justify="right" if column != "check" else "left")
    for name, c in summary["checks"].items():
        close = c["closest_margin_in_tolerances"]
        checks.add_row(
            name,
            f"{c['rows']:,}",
            f"{c['holds']:,}",
            str(c["violated"]),
            str(c["undecided"]),
            "-" if close is None else f"{close:.3g}",
        )
    out.print(checks)
    fit = summary["fit_all_rows"]
    if fit["slope"] is not None:
        out.print(f"gain ≈ {fit['constant']:.4g} · (2m(1 − m))^{fit['slope']:.4f} over {fit['rows']:,} rows")
    heads = summary["ranking_last_record"]
    ranking = Table(
        title=f"the {min(len(heads), SHOWN)} heads of lowest median realised gain at the last record"
        f" (of {len(heads)}; all in report.json)"
    )
    for column in ("layer", "head", "median m", "median gain", "previous-token share"):
        ranking.add_column(column, justify="right")
    for h in heads[:SHOWN]:
        share = h["previous_token_share"]
        ranking.add_row(
            str(h["layer"]),
            str(h["head"]),
            f"{h['median_m']:.3f}",
            f"{h['median_gain']:.4g}",
            "-" if share is None else f"{share:.1%}",
        )
    out.print(ranking)
    if summary["fused_attention_calls"]:
        out.print(
            f"{summary['fused_attention_calls']} fused attention calls hid their probabilities (use eager attention)"
        )
    out.print(f"wrote {folder / 'report.json'}, {folder / 'trajectories.png'} and {folder / 'gain_vs_capacity.png'}")
