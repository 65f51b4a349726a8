"""The fidelity table (docs/fidelity.md) and the statement index (docs/statements.md): every row's
status, theorem, page, claims and recorded keys are real, no figure is a constant, and every theorem
of the docs has one stable number whose claims and tests exist."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

import rankwall.checks.claims  # noqa: F401  (registers every family)
from rankwall.checks import fidelity
from rankwall.checks.fidelity import ROWS, STATEMENTS, Checked, Computed, Kind, Pointer, Recorded, Row, Status
from rankwall.checks.verdict import REGISTRY

DOCS = Path(__file__).resolve().parents[1] / "docs"
IDS = [f"{i:02d}-seed{r.seed}-{r.where}" for i, r in enumerate(ROWS, 1)]


def test_there_is_a_row_for_each_seed_and_status_counts_add_up():
    assert {r.seed for r in ROWS} == {"000", "001", "002"}
    assert sum(fidelity.counts().values()) == len(ROWS)
    assert len(ROWS) >= 50


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
    for figure in row.figures:
        for named in figure.claims if isinstance(figure, Checked) else ():
            base, _, mutant = named.partition("[")
            if mutant:
                assert mutant.rstrip("]") in REGISTRY[base].mutants, named


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_theorem_a_row_names_is_in_the_statement_index(row: Row):
    if row.theorem:
        assert row.theorem in {s.label for s in STATEMENTS}, row.theorem


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


def test_the_page_builds_the_table_from_the_rows():
    page = (DOCS / "fidelity.md").read_text()
    assert "```{fidelity-table}" in page
    assert "checks/fidelity.py" in page


def test_a_mutant_figure_counts_the_witnesses_that_refute_it():
    """A planted false variant is reported by how often it is violated, and it is violated."""
    text = Checked(("softmax-jacobian.trace[equals-entropy]",)).text(DOCS)
    n, m = map(int, re.search(r"is violated on (\d+) of (\d+) witnesses", text).groups())
    assert 0 < n <= m


# --------------------------------------------------------------------------- the statement index

PROOF_LABEL = re.compile(r"^```\{prf:(theorem|lemma|proposition|corollary)\}[^\n]*\n:label: ([\w-]+)", re.MULTILINE)


def defined_labels() -> dict[str, str]:
    """label -> page, for every numbered statement of the docs."""
    found = {}
    for page in DOCS.glob("*.md"):
        for _, label in PROOF_LABEL.findall(page.read_text()):
            assert label not in found, f"{label} defined twice"
            found[label] = page.stem
    return found


def test_every_theorem_of_the_docs_has_exactly_one_entry_and_vice_versa():
    indexed = {s.label: s.page for s in STATEMENTS}
    assert len(indexed) == len(STATEMENTS), "a label is indexed twice"
    assert defined_labels() == indexed


def test_stable_numbers_are_unique_and_carry_their_page_prefix():
    numbers = [s.number for s in STATEMENTS]
    assert len(set(numbers)) == len(numbers)
    for s in STATEMENTS:
        prefix, serial = s.number.split(".")
        assert prefix == fidelity.PREFIXES[s.page] and serial.isdigit() and int(serial) >= 1, s.number


@pytest.mark.parametrize("statement", STATEMENTS, ids=[s.number for s in STATEMENTS])
def test_a_statements_claims_and_tests_exist(statement):
    assert isinstance(statement.kind, Kind) and statement.seed.strip()
    for claim_id in statement.claims:
        assert REGISTRY[claim_id].id == claim_id
    for node in statement.tests:
        path, name = node.split("::")
        source = (DOCS.parent / path).read_text()
        assert re.search(rf"^(class|def) {re.escape(name)}\b", source, re.MULTILINE), node


def test_every_corrected_statement_is_in_the_errata():
    errata = (DOCS / "errata.md").read_text()
    for s in STATEMENTS:
        if s.kind is Kind.CORRECTED:
            assert f"`{s.label}`" in errata, s.label

