"""The fidelity table (docs/fidelity.md): every row's status, page, claims and recorded keys are
real, and no figure is a constant."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

import rankwall.checks.claims  # noqa: F401  (registers every family)
from rankwall.checks import fidelity
from rankwall.checks.fidelity import ROWS, Checked, Computed, Pointer, Recorded, Row, Status
from rankwall.checks.verdict import REGISTRY

DOCS = Path(__file__).resolve().parents[1] / "docs"
IDS = [f"{i:02d}-seed{r.seed}-{r.where}" for i, r in enumerate(ROWS, 1)]


def test_there_is_a_row_for_each_seed_and_status_counts_add_up():
    assert {r.seed for r in ROWS} == {"000", "001", "002"}
    assert sum(fidelity.counts().values()) == len(ROWS)
    assert len(ROWS) >= 30


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_status_is_one_of_five_and_a_departure_says_why(row: Row):
    assert isinstance(row.status, Status)
    assert row.seed_says.strip() and row.where.strip() and row.command.strip()
    if row.status is not Status.REPRODUCED:
        assert row.reason.strip(), "every status but 'reproduced' needs a reason"


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_page_exists_and_is_in_the_toctree(row: Row):
    assert (DOCS / f"{row.page}.md").exists(), row.page
    assert f"\n{row.page}\n" in (DOCS / "index.md").read_text()


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_claims_exist_in_the_registry(row: Row):
    for claim_id in row.claim_ids:
        assert REGISTRY[claim_id].id == claim_id


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_recorded_json_exists_and_key_path_resolves(row: Row):
    for pointer in row.pointers:
        assert (DOCS / "_static" / pointer.file).exists(), pointer.file
        pointer.read(DOCS)  # raises KeyError / IndexError when the path does not resolve


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_figure_is_read_from_evidence_never_a_literal(row: Row):
    if row.status is not Status.OUT_OF_REACH:
        assert row.figures, "only an out-of-reach row may have no figure"
    for figure in row.figures:
        assert isinstance(figure, Recorded | Checked | Computed), type(figure)
        if isinstance(figure, Recorded):
            assert figure.pointers
            assert len(inspect.signature(figure.words).parameters) == len(figure.pointers)
        if isinstance(figure, Checked):
            assert figure.claims


def test_a_recorded_figure_follows_its_file(tmp_path):
    """Change the recorded value and the figure changes: nothing is cached as text."""
    (tmp_path / "_static" / "spot").mkdir(parents=True)
    (tmp_path / "_static" / "spot" / "spot.json").write_text('{"eq1": {"cosine": 0.5}}')
    row = next(r for r in ROWS if r.pointers == (Pointer(fidelity.SPOT, ("eq1", "cosine")),))
    assert "0.5000" in row.figure(tmp_path)
    assert "0.5000" not in row.figure(DOCS)


def test_a_bad_pointer_is_caught():
    with pytest.raises(KeyError):
        Pointer(fidelity.SPOT, ("eq1", "no such key")).read(DOCS)


def test_out_of_reach_without_a_reason_is_caught():
    bad = dataclasses.replace(ROWS[0], status=Status.OUT_OF_REACH, reason="")
    with pytest.raises(AssertionError):
        test_status_is_one_of_five_and_a_departure_says_why(bad)


def test_the_page_prints_the_table():
    page = (DOCS / "fidelity.md").read_text()
    assert ">>> print(fidelity.render(DOCS))" in page
    assert "checks/fidelity.py" in page
