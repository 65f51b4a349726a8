"""Issue 26's reproducers, each through the public route a researcher takes: ``rankwall.check`` on the
instance, ``rankwall verify --claims`` and ``rankwall search --claims`` on a file of declarations, and
``rankwall replay`` of a saved case. Each true statement holds or is inconclusive (never violated), each
false one is violated or inconclusive (never holds), and two statements about one instance never get
contradicting certified verdicts."""

from __future__ import annotations

import json
import textwrap
from fractions import Fraction

import pytest

import rankwall
from rankwall import softmax_jacobian as sj
from rankwall.checks.cli import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_VIOLATED, main
from rankwall.checks.engine.verdict import Status

TWO_TO_MINUS_250 = Fraction(1, 2**250)

#: The instances of the report: a tail that underflows (gap 746, 724), a row whose float tail is 0
#: while its exact softmax is positive (gap 800), a norm in the normal range that ends in a bisection
#: (gap 700), two atoms whose norm lies below the least subnormal, and a rational runner-up row.
INSTANCES = {
    "gap-746": "sj.Logits(V=3, gap=746.0, offset=0.0, runners=1, tail_gap=0.0)",
    "gap-724": "sj.Logits(V=3, gap=724.0, offset=0.0, runners=1, tail_gap=0.0)",
    "gap-800": "sj.Logits(V=3, gap=800.0)",
    "gap-800-tail-30": "sj.Logits(V=3, gap=800.0, runners=1, tail_gap=30.0)",
    "gap-700": "sj.Logits(V=5, gap=700.0, runners=4, tail_gap=0.0)",
    "two-atoms-746": "sj.Logits(V=2, gap=746.0)",
    "runner-up": "sj.RunnerUp(V=4, m=0.5, tail_mass=0.25)",
}

#: (name, statement as written for declare, whether it is true on the reals: on every instance here, or
#: on the instances named). "trace-above-rank-gap" says tr J ≥ 2⁻²⁵⁰ on a positive row (rank J − |supp p|
#: + 1 = 0), false on every logits row here (tr J ≤ 1e-300) and true on the runner-up row.
STATEMENTS = [
    ("v-minus-one-norm-at-least-trace", "lhs=(sj.vocabulary - 1) * sj.norm, relation='>=', rhs=sj.trace", True),
    ("norm-at-most-trace", "lhs=sj.norm, relation='<=', rhs=sj.trace", True),
    ("lower-bound", "lhs=sj.norm, relation='>=', rhs=sj.top * sj.complement", True),
    ("two-atom-upper-bound", "lhs=sj.norm, relation='<=', rhs=2 * sj.top * sj.complement", True),
    ("rank-at-most-v-minus-2", "lhs=sj.rank, relation='<=', rhs=sj.vocabulary - 2", False),
    (
        "trace-above-rank-gap",
        "lhs=sj.trace, relation='>=', rhs=sj.rank - sj.support + 1 + Fraction(1, 2**250)",
        {"runner-up"},
    ),
    (
        "norm-equals-a-shifted-maximum",
        "lhs=sj.norm, relation='==', rhs=(1 + Fraction(1, 2**200)) * rankwall.maximum(sj.norm, sj.complement, "
        "Fraction(-11, 12))",
        False,
    ),
]


def claims_file(tmp_path, instance: str) -> str:
    """A user's file declaring every statement on one instance (a Cases bundle of that one case)."""
    lines = [
        "from fractions import Fraction",
        "import rankwall",
        "from rankwall import declare, Cases, softmax_jacobian as sj",
        "from hypothesis import strategies as st",
        f"CASE = {INSTANCES[instance]}",
        "ONE = Cases(strategy=lambda: st.just(CASE), witnesses=lambda V: [CASE], family=sj.rows.family)",
    ]
    for name, sides, _ in STATEMENTS:
        lines.append(f"declare('r26.{instance}.{name}', statement='{name}', {sides}, cases=ONE, default_V=3)")
    path = tmp_path / f"{instance}.py"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def allowed(true: bool | set[str], instance: str) -> set[Status]:
    if isinstance(true, set):
        true = instance in true
    return {Status.HOLDS, Status.INCONCLUSIVE} if true else {Status.VIOLATED, Status.INCONCLUSIVE}


@pytest.mark.parametrize("instance", list(INSTANCES))
def test_no_statement_gets_the_wrong_certified_verdict(tmp_path, instance):
    """Through ``rankwall.check``: the verdict of each statement on each instance is allowed by its truth."""
    claims = {c.id: c for c in rankwall.load_claims(claims_file(tmp_path, instance))}
    case = eval(INSTANCES[instance], {"sj": sj})
    for name, _, true in STATEMENTS:
        try:
            verdict = rankwall.check(claims[f"r26.{instance}.{name}"], case)
        except rankwall.InputError:
            continue  # a statement undefined on the instance, or a case outside the row's domain
        assert verdict.status in allowed(true, instance), (instance, name, verdict.to_json())


def test_the_reported_cases_decide_as_the_reals_do(tmp_path):
    """The specific outcomes of the report: the rank statement is not certified to hold on the exact row of
    gap 800, and the lower bound and its 1.9 version on gap 746 do not contradict each other."""
    claims = {c.id: c for c in rankwall.load_claims(claims_file(tmp_path, "gap-800"))}
    rank = rankwall.check(claims["r26.gap-800.rank-at-most-v-minus-2"], sj.Logits(V=3, gap=800.0))
    assert rank.status is Status.VIOLATED, rank.to_json()  # rank J = V − 1 = 2 on the positive exact row
    claims = {c.id: c for c in rankwall.load_claims(claims_file(tmp_path, "gap-746"))}
    case = eval(INSTANCES["gap-746"], {"sj": sj})
    lower = rankwall.check(claims["r26.gap-746.lower-bound"], case)
    assert lower.status is not Status.VIOLATED, lower.to_json()


@pytest.mark.parametrize("instance", ["gap-746", "gap-800", "two-atoms-746"])
def test_verify_and_search_with_claims_agree(tmp_path, capsys, instance):
    """``verify --claims`` and ``search --claims``: true statements never exit 1 (no certified violation,
    no counterexample); the false rank statement never exits 0 on gap 800."""
    path = claims_file(tmp_path, instance)
    for name, _, true in STATEMENTS:
        code = main(["verify", "--claims", path, f"r26.{instance}.{name}", "--json"])
        out = capsys.readouterr().out
        if true is True or (isinstance(true, set) and instance in true):
            assert code in (EXIT_OK, EXIT_INCONCLUSIVE, 2), (instance, name, out[-800:])
        elif instance == "gap-800" and name == "rank-at-most-v-minus-2":
            assert code == EXIT_VIOLATED, out[-800:]
            assert json.loads(out)[0]["status"] == "violated"
    code = main(["search", "--claims", path, f"r26.{instance}.lower-bound", "--budget", "5"])
    capsys.readouterr()
    assert code in (EXIT_OK, EXIT_INCONCLUSIVE)


def test_replay_repeats_the_true_verdict(tmp_path, capsys):
    """A saved violation of the false rank statement replays as violated, in NumPy and torch float32."""
    path = claims_file(tmp_path, "gap-800")
    saved = tmp_path / "saved"
    code = main(
        ["search", "--claims", path, "r26.gap-800.rank-at-most-v-minus-2", "--budget", "5", "--save", str(saved)]
    )
    capsys.readouterr()
    assert code == EXIT_VIOLATED
    (found,) = list(saved.iterdir())
    for extra in ([], ["--backend", "torch", "--dtype", "float32"]):
        code = main(["replay", str(found), "--claims", path, *extra])
        capsys.readouterr()
        assert code == EXIT_VIOLATED, extra


def test_the_files_are_what_a_user_writes():
    """The declarations above are plain public API: no private name is needed."""
    source = textwrap.dedent("\n".join(sides for _, sides, _ in STATEMENTS))
    assert "_" not in source.replace("rankwall.maximum", "").replace("sj.", "").replace("2**", "")
