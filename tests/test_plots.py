"""Every PNG the project writes is legible at its default size (issue 19, item 11; issue 28, item
10): no tick labels of one axis overlap, no legend covers data, no line is hidden under another and
no bar covers a band. Drawn from the recorded runs of docs/_static (and spot records cut to every
run length from 16 tokens up, where a log axis spans a decade or less), with matplotlib reporting
the boxes and the paths."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from rankwall.checks.experiments import experiments
from rankwall.checks.models import spot
from rankwall.checks.run.outputs import layout_problems

STATIC = Path(__file__).resolve().parents[1] / "docs" / "_static"


def drawn(plot, data) -> plt.Figure:
    """The figure ``plot`` draws for ``data``, before it is saved and closed."""
    figures = []
    with (
        mock.patch.object(plt.Figure, "savefig", lambda self, *a, **k: figures.append(self)),
        mock.patch.object(plt, "close", lambda *a: None),
    ):
        plot(data, Path("unused.png"))
    return figures[0]


RECORDED = [name for name in experiments() if (STATIC / "experiments" / f"{name.replace('-', '_')}.json").exists()]


@pytest.mark.parametrize("name", RECORDED)
def test_every_experiment_figure_is_legible(name):
    data = json.loads((STATIC / "experiments" / f"{name.replace('-', '_')}.json").read_text())
    assert layout_problems(drawn(experiments()[name].plot, data)) == []


@pytest.mark.parametrize("largest", [1024, 512, 256, 96, 64, 48, 32, 16])
def test_the_spot_figure_is_legible_for_short_runs(largest):
    """`rankwall spot --tokens N` measures Figure 7 at 16, 32, ... up to N: every N from 16 to 1,024."""
    record = json.loads((STATIC / "spot" / "spot.json").read_text())
    record["gradient_rank"] = [r for r in record["gradient_rank"] if r["tokens"] <= largest]
    assert layout_problems(drawn(spot.plot, record)) == []


@pytest.mark.parametrize(("sizes", "ticks"), [([16, 32, 64, 96], [16, 32, 64, 96]), ([16, 512, 520], [16, 520])])
def test_a_run_length_just_past_a_power_of_two_takes_its_label(sizes, ticks):
    assert spot.token_ticks(sizes) == ticks


def test_the_spot_figure_at_an_odd_length_is_legible():
    """520 tokens: Figure 7 at 16, ..., 512 and 520, two sizes a sixtieth of an octave apart."""
    record = json.loads((STATIC / "spot" / "spot.json").read_text())
    rows = [r for r in record["gradient_rank"] if r["tokens"] <= 512]
    record["gradient_rank"] = [*rows, {**rows[-1], "tokens": 520, "certified_rank": 520}]
    assert layout_problems(drawn(spot.plot, record)) == []


def test_the_mos_rank_figure_marks_each_k_and_names_d_plus_one():
    """mos_rank.png: the K axis is labelled at the K values run, and each D + 1 line carries its value."""
    data = json.loads((STATIC / "experiments" / "mos_rank.json").read_text())
    figure = drawn(experiments()["mos-rank"].plot, data)
    left = figure.axes[0]
    run = sorted({r["K"] for r in data["records"] if r["head"] != "softmax"})
    labelled = [
        t.get_text() for t in left.get_xticklabels() if t.get_text() and min(run) <= t.get_position()[0] <= max(run)
    ]
    assert labelled == [str(K) for K in run]
    assert not [t for t in left.get_xticklabels(minor=True) if t.get_text()]
    names = {t.get_text() for t in left.texts}
    assert {f"D + 1 = {r['D'] + 1}" for r in data["records"]} <= names
    plt.close(figure)


#: The shape of a default `rankwall experiment batch-rank` run (its three languages and five batch sizes):
#: language, batch tokens, rank / (V - 1), components for 70% / 99% / 99.9% of the norm.
BATCH_RANK_RUN = [
    ("zipf V=1024", 64, 0.063, (7, 37, 55)), ("zipf V=1024", 256, 0.241, (9, 105, 187)),
    ("zipf V=1024", 1024, 0.744, (11, 264, 499)), ("zipf V=1024", 4096, 0.983, (13, 545, 775)),
    ("zipf V=1024", 8192, 0.998, (13, 644, 859)), ("words bigram V=2048", 64, 0.021, (4, 28, 32)),
    ("words bigram V=2048", 256, 0.063, (7, 75, 85)), ("words bigram V=2048", 1024, 0.157, (10, 141, 172)),
    ("words bigram V=2048", 4096, 0.405, (7, 247, 353)), ("words bigram V=2048", 8192, 0.547, (9, 277, 445)),
    ("chars 4-gram V=65", 64, 0.734, (6, 23, 26)), ("chars 4-gram V=65", 256, 0.969, (7, 32, 40)),
    ("chars 4-gram V=65", 1024, 0.984, (7, 39, 50)), ("chars 4-gram V=65", 4096, 1.0, (7, 40, 52)),
    ("chars 4-gram V=65", 8192, 1.0, (7, 40, 53)),
]  # fmt: skip


def test_the_batch_rank_figure_is_legible_at_its_default_sizes():
    from rankwall.checks.experiments import batch_rank

    records = [
        {"language": language, "batch_tokens": b, "rank_share_of_V_minus_1": share,
         "components": dict(zip(map(str, batch_rank.SHARES), components, strict=True))}
        for language, b, share, components in BATCH_RANK_RUN
    ]  # fmt: skip
    assert layout_problems(drawn(batch_rank.plot, records)) == []


def test_the_check_can_fail():
    """Overlapping tick labels and a legend over the data are both reported."""
    figure, ax = plt.subplots(figsize=(2, 2))
    ax.plot(range(10), range(10), "o", label="data")
    ax.legend(loc="center")
    ax.set_xticks(range(10), [f"label {i}" for i in range(10)])
    problems = layout_problems(figure)
    plt.close(figure)
    assert any("tick labels" in p for p in problems) and any("legend covers" in p for p in problems)


def test_the_check_sees_a_line_hidden_under_another():
    """A dotted reference laid on a solid curve, and a solid curve drawn under an equal one, are hidden;
    the same lines apart, a solid line over a wider pale one, and markers on a line are not."""

    def problems_of(draw) -> list[str]:
        figure, ax = plt.subplots(figsize=(4, 3))
        draw(ax)
        found = layout_problems(figure)
        plt.close(figure)
        return found

    x = [1, 2, 4, 8, 16]
    dotted_on_solid = problems_of(lambda ax: (ax.plot(x, x, "o-", label="rank"), ax.plot(x, x, ":", label="ref")))
    assert dotted_on_solid == ["panel 1: the line 'ref' is hidden under the line 'rank' (100% of its length)"]
    under = problems_of(lambda ax: (ax.plot(x, x, label="first"), ax.plot(x, x, label="second")))
    assert under == ["panel 1: the line 'first' is hidden under the line 'second' (100% of its length)"]
    assert problems_of(lambda ax: (ax.plot(x, x, label="a"), ax.plot(x, [2 * v for v in x], ":", label="b"))) == []
    assert problems_of(lambda ax: (ax.plot(x, x, lw=7, alpha=0.3), ax.plot(x, x, label="on a pale band"))) == []
    assert problems_of(lambda ax: (ax.plot(x, x), ax.plot(x, x, "o", label="markers"))) == []


def test_the_check_sees_a_bar_over_a_band():
    """A bar that reaches into an axhspan hides it there (whichever is drawn first); a bar beside it does not."""
    for band_first in (True, False):
        figure, ax = plt.subplots(figsize=(3, 3))
        if band_first:
            ax.axhspan(0.95, 0.99, alpha=0.15, label="range")
        ax.bar([0], [0.99], label="measured")
        if not band_first:
            ax.axhspan(0.95, 0.99, alpha=0.15, label="range")
        problems = layout_problems(figure)
        plt.close(figure)
        assert len(problems) == 1 and "'measured' covers" in problems[0] and "band 'range'" in problems[0], problems
    figure, ax = plt.subplots(figsize=(3, 3))
    ax.bar([0], [0.5])
    ax.axhspan(0.95, 0.99, alpha=0.15)
    assert layout_problems(figure) == []
    plt.close(figure)
