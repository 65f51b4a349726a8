"""Every PNG the project writes is legible at its default size (issue 19, item 11): no tick labels
of one axis overlap, and no legend covers data. Drawn from the recorded runs of docs/_static (and a
small spot record, where a log axis spans less than a decade), with matplotlib reporting the boxes."""

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
from rankwall.checks.outputs import layout_problems

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


@pytest.mark.parametrize("largest", [1024, 64, 48, 32])
def test_the_spot_figure_is_legible_for_short_runs(largest):
    record = json.loads((STATIC / "spot" / "spot.json").read_text())
    record["gradient_rank"] = [r for r in record["gradient_rank"] if r["tokens"] <= largest]
    assert layout_problems(drawn(spot.plot, record)) == []


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
