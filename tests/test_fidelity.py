"""The fidelity table (docs/fidelity.md) and the statement index (docs/statements.md): every row's
status, theorem, page, claims and recorded keys are real, no figure is a constant, and every theorem
of the docs has one stable number whose claims and tests exist."""

from __future__ import annotations

import dataclasses
import inspect
import re
from importlib import metadata
from itertools import pairwise
from pathlib import Path

import pytest

import rankwall.checks.claims  # noqa: F401  (registers every family)
from rankwall.checks.claims import FAMILY_MODULES
from rankwall.checks.companion import fidelity
from rankwall.checks.companion.fidelity import ROWS, STATEMENTS, Checked, Computed, Pointer, Recorded, Row, Status
from rankwall.checks.engine.statements import Kind, changed, read_record, recorded_versions, stated, theorems
from rankwall.checks.engine.verdict import REGISTRY

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
    assert "checks/companion/fidelity.py" in page


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
    prefixes: dict[str, set[str]] = {}
    for s in STATEMENTS:
        prefix, serial = s.number.split(".")
        assert prefix.isupper() and serial.isdigit() and int(serial) >= 1, s.number
        prefixes.setdefault(s.page, set()).add(prefix)
    assert all(len(p) == 1 for p in prefixes.values()), f"a page with two prefixes: {prefixes}"
    assert len({p for ps in prefixes.values() for p in ps}) == len(prefixes), f"two pages share a prefix: {prefixes}"


def test_each_family_states_its_own_pages_theorems():
    for module in FAMILY_MODULES:
        pages = {s.page for s in getattr(module, "STATEMENTS", ())}
        assert len(pages) <= 1, f"{module.__name__} states theorems of several pages: {pages}"


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


def test_a_title_that_names_a_kind_names_the_index_kind():
    """A theorem's title and its index entry agree on its kind ("(new)", "(reconstructed)", "(corrected)",
    "(the seed's ...)"), the strongest word deciding: a statement reconstructed and corrected is corrected."""
    pages = theorems(DOCS)
    for s in STATEMENTS:
        title = pages[s.label][1]
        for word, kind in (
            ("corrected", Kind.CORRECTED),
            ("reconstructed", Kind.RECONSTRUCTED),
            ("new", Kind.NEW),
            ("the seed's", Kind.SEED),
        ):
            if re.search(rf"\({word}\b|, {word}\b|\b{word}[,)]", title):
                assert s.kind is kind, (s.number, title, s.kind)
                break


def test_the_kind_check_sees_a_wrong_title():
    assert re.search(r"\(reconstructed\b", "Rank (reconstructed)") and not re.search(r"\(new\b", "Rank (reconstructed)")


# --------------------------------------------------------------------------- statuses the third reading settled

#: (seed, the start of what the seed says) -> the status a reading of every row settled (issue 30).
SETTLED = {
    ("000", "the logit gradient has full rank V"): Status.REFUTED,
    ("000", "two hidden dimensions suffice"): Status.REPRODUCED,
    ("000", "the first 5-10 coefficients"): Status.REPRODUCED,
    ("000", "the update along the H-gradient"): Status.OUT_OF_REACH,
    ("000", "the bound of Prop. A.6 is non-vacuous"): Status.QUALIFIED,
    ("000", "the first-order optimal logit update is the logit gradient"): Status.REPRODUCED,
    ("001", "measured ranks: softmax d = 400"): Status.OUT_OF_REACH,
    ("001", "MoE layers are mixtures of contexts"): Status.REPRODUCED,
    ("002", "the row's width does not enter"): Status.QUALIFIED,
    ("002", "replacing the head by a fixed shift-by-one costs about 841"): Status.QUALIFIED,
    ("002", "the 1/sqrt(d) scale"): Status.QUALIFIED,
}


@pytest.mark.parametrize(("key", "status"), SETTLED.items(), ids=[k[1][:32] for k in SETTLED])
def test_the_statuses_the_third_reading_settled(key, status):
    rows = [r for r in ROWS if (r.seed, r.seed_says[: len(key[1])]) == key]
    assert len(rows) == 1 and rows[0].status is status, (key, [r.status for r in rows])


def test_the_figures_behind_the_settled_statuses():
    """The 841 row shows the 866 of the printed values; the A.6 row a certified rank above 2D; the width row
    two different norms; the kernel row rests on SJ.1, where J1 = 0 is stated."""
    by_says = {r.seed_says: r for r in ROWS}
    row = next(r for says, r in by_says.items() if "841" in says)
    assert "= 866;" in row.figure(DOCS)
    row = next(r for says, r in by_says.items() if "Prop. A.6 is non-vacuous" in says)
    rank, two_D = map(
        lambda x: int(x.replace(",", "")),
        re.search(r"2D = ([\d,]+): certified rank >= ([\d,]+)", row.figure(DOCS)).groups()[::-1],
    )
    assert rank > two_D
    row = next(r for says, r in by_says.items() if says.startswith("the row's width"))
    norms = re.search(r"\|\|J\|\| = ([\d.]+) \(64 positions\), ([\d.]+) \(2 positions\)", row.figure(DOCS))
    wide, narrow = norms.groups()
    assert float(wide) < float(narrow)
    row = next(r for says, r in by_says.items() if says.startswith("J annihilates the constant direction"))
    assert row.theorem == "thm-variance"


# --------------------------------------------------------------------------- the index of each release


def test_every_indexed_statement_has_its_text_on_its_page():
    pages = theorems(DOCS)
    for s in stated(STATEMENTS, DOCS):
        assert s.text and s.title and s.directive, s.number
        assert pages[s.label][0] == s.directive


def test_the_statement_index_is_the_one_recorded_for_this_version():
    """A numbered statement that changes (its text, title, kind or seed reference) needs a new version:
    bump it in pyproject.toml and CITATION.cff, list the change in docs/errata.md under it, and run
    python scripts/statement_index.py --write."""
    release = metadata.version("rankwall")
    assert release in recorded_versions(DOCS), f"no record for rankwall {release}"
    assert recorded_versions(DOCS)[-1] == release, "the current version is not the newest record"
    differences = changed(read_record(release, DOCS), stated(STATEMENTS, DOCS))
    assert not differences, f"changed since the record of rankwall {release}: {differences}; bump the version"


def test_every_change_between_releases_is_listed_under_the_later_release():
    errata = (DOCS / "errata.md").read_text()
    for old, new in pairwise(recorded_versions(DOCS)):
        start = errata.index(f"### rankwall {new}")
        section = errata[start : errata.find("\n#", start + 1)]
        for number in changed(read_record(old, DOCS), read_record(new, DOCS)):
            assert re.search(rf"\b{re.escape(number)}\b", section), (new, number)


def test_a_changed_statement_is_caught():
    """The comparison sees a changed word, a changed kind and a new number."""
    index = stated(STATEMENTS, DOCS)
    first = index[0]
    edited = [dataclasses.replace(first, text=first.text + " Moreover."), *index[1:]]
    assert changed(index, edited) == [first.number]
    other_kind = next(k.value for k in Kind if k.value != first.kind)
    assert changed(index, [dataclasses.replace(first, kind=other_kind), *index[1:]]) == [first.number]
    assert changed(index[1:], index) == [first.number]


def test_the_third_reading_s_wording_fixes_stand():
    """Issue 30 items 6 and 8: the statement of ``lower-bound-approached`` names its hypothesis
    m ≥ 1/(n + 1), without which it is false (V = 3, m = 0.1: ‖J‖₂ = 0.45 > 0.18); EX.3 says "never the
    strict argmax" (at h = 0 every token ties, so each is an argmax)."""
    assert "m ≥ 1/(n + 1)" in REGISTRY["softmax-jacobian.lower-bound-approached"].statement
    page = (DOCS / "expressivity.md").read_text(encoding="utf-8")
    theory = (DOCS.parent / "theory" / "expressivity.py").read_text(encoding="utf-8")
    assert "never the strict argmax" in page and "never the strict argmax" in theory
    assert "is never the argmax" not in page + theory
