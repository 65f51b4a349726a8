"""Statements of one's own (issue 17): a claim declared with public names gets everything a shipped
one has, decides with certified margins, and can fail; claims load from files, modules and entry
points; counterexamples replay from files; pytest runs a user's theorems."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import strategies as st

import rankwall
from rankwall import Cases, declare
from rankwall import softmax_jacobian as sj
from rankwall.checks.claims import FAMILY_MODULES
from rankwall.checks.cli import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, main
from rankwall.checks.engine.verdict import REGISTRY, Certification, Status, case_from_json, exact_json
from rankwall.checks.run import loader

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "conjectures.py"


@pytest.fixture
def scoped():
    """Claims declared in a test are unregistered after it (the registry-wide tests never see them)."""
    before = {c.id for c in REGISTRY}
    yield
    for claim_id in {c.id for c in REGISTRY} - before:
        REGISTRY.unregister(claim_id)
    for source in list(loader._LOADED):
        loader._LOADED.pop(source)


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class TestTheExamplesUsePublicNamesOnly:
    def test_each_example_is_short_and_imports_only_rankwall(self):
        tree = ast.parse(EXAMPLES.read_text())
        imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom | ast.Import)]
        assert all(isinstance(n, ast.ImportFrom) and n.module == "rankwall" for n in imports)
        private = [a.attr for a in ast.walk(tree) if isinstance(a, ast.Attribute) and a.attr.startswith("_")]
        assert not private
        calls = [n for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
        assert len(calls) == 2 and all(n.end_lineno - n.lineno + 1 <= 30 for n in calls)

    def test_every_name_a_family_exports_exists(self):
        for family_module in FAMILY_MODULES:
            module = getattr(rankwall, family_module.__name__.rsplit(".", 1)[1])
            assert module.__all__ and all(hasattr(module, name) for name in module.__all__)


class TestADeclaredClaimDecides:
    """The float margin proves "holds"; anything else is re-decided exactly, and a violation is certified."""

    def test_a_false_constant_is_refuted_exactly_on_the_runner_up_row(self, scoped):
        claim = declare("t.below-1.9", statement="‖J‖ ≤ 1.9 m(1 − m)", lhs=sj.norm, relation="<=",
                        rhs=1.9 * sj.top * sj.complement, cases=sj.rows)  # fmt: skip
        verdict = claim.check(sj.RunnerUp(2, 0.5), rankwall.backend())
        assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.EXACT
        assert (verdict.lhs, verdict.rhs) == (0.5, 0.475)  # 2m(1 − m) = 1/2 against 19/10 · 1/4

    def test_an_attained_bound_holds_exactly_through_the_secular_sign(self, scoped):
        claim = declare("t.sharp", statement="‖J‖ ≤ 2m(1 − m)", lhs=sj.norm, relation="<=",
                        rhs=2 * sj.top * sj.complement, cases=sj.rows)  # fmt: skip
        verdict = claim.check(sj.RunnerUp(64, 0.75), rankwall.backend())
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT
        assert verdict.margin == 0

    def test_tightening_an_attained_bound_refutes_it(self, scoped):
        claim = declare("t.sharp", statement="‖J‖ ≤ 2m(1 − m)", lhs=sj.norm, relation="<=",
                        rhs=2 * sj.top * sj.complement, cases=sj.rows)  # fmt: skip
        verdict = claim.check(sj.RunnerUp(64, 0.75), rankwall.backend(), Fraction(999, 1000))
        assert verdict.status is Status.VIOLATED

    def test_a_lower_bound_reads_the_other_way(self, scoped):
        claim = declare("t.lower", statement="‖J‖ ≥ m(1 − m)", lhs=sj.norm, relation=">=",
                        rhs=sj.top * sj.complement, cases=sj.rows)  # fmt: skip
        assert claim.direction == "lower"
        assert all(claim.check(c, rankwall.backend()).status is Status.HOLDS for c in claim.witnesses(64))
        doubled = claim.check(sj.SpreadTail(64, 0.5), rankwall.backend(), Fraction(2))
        assert doubled.status is Status.VIOLATED

    def test_integer_sides_decide_on_certified_intervals(self, scoped):
        claim = declare("t.rank", statement="rank J = |supp p| − 1", lhs=sj.rank, relation="==",
                        rhs=sj.support - 1, cases=sj.rows)  # fmt: skip
        verdicts = [claim.check(c, rankwall.backend()) for c in claim.witnesses(64)]
        assert all(v.status is Status.HOLDS for v in verdicts)
        off = declare("t.rank-V", statement="rank J = V", lhs=sj.rank, relation="==", rhs=sj.vocabulary,
                      cases=sj.rows)  # fmt: skip
        assert off.check(sj.Uniform(8), rankwall.backend()).status is Status.VIOLATED

    def test_a_declared_mutant_is_a_planted_false_variant(self, scoped):
        claim = declare("t.trace", statement="tr J = 1 − Σp²", lhs=sj.trace, relation="==",
                        rhs=sj.collision_complement, cases=sj.rows)  # fmt: skip
        mutant = claim.with_mutant("entropy", statement="tr J = H(p)", rhs=sj.entropy)
        assert rankwall.get_claim("t.trace[entropy]") is mutant
        assert mutant.check(sj.Uniform(8), rankwall.backend()).status is Status.VIOLATED
        assert claim.check(sj.Uniform(8), rankwall.backend()).status is Status.HOLDS

    def test_a_side_the_exact_route_cannot_settle_is_inconclusive(self, scoped):
        """H(p) = log 2 on two equal logits: the entropy and log 2 are the same transcendental number,
        which no ball shows equal, so the verdict says it could not decide."""
        even = Cases(lambda: st.just(sj.Logits(2, 0.0)), lambda V: [sj.Logits(2, 0.0)])
        claim = declare("t.entropy", statement="H(p) ≥ log 2", lhs=sj.entropy, relation=">=",
                        rhs=rankwall.log(2), cases=even)  # fmt: skip
        verdict = claim.check(sj.Logits(2, 0.0), rankwall.backend())
        assert verdict.status is Status.INCONCLUSIVE and verdict.certified_by is None, verdict.to_json()

    def test_an_attained_transcendental_bound_is_decided_exactly(self, scoped):
        """Two atoms from logits attain 2m(1 − m): written as 2m − 2m², the bound and the norm are the same
        rational function of the logits' weight (an identity in the instance's atoms, exact); written as
        2·m·(1 − m), its structure lets the two-atom lemma decide it exactly."""
        two_atoms = Cases(lambda: st.just(sj.Logits(2, 1.0)), lambda V: [sj.Logits(2, 1.0)])
        claim = declare("t.logits", statement="‖J‖ ≤ 2m − 2m²", lhs=sj.norm, relation="<=",
                        rhs=2 * sj.top - 2 * sj.top * sj.top, cases=two_atoms)  # fmt: skip
        verdict = claim.check(sj.Logits(2, 1.0), rankwall.backend())
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT, verdict.to_json()
        structured = declare("t.logits-lemma", statement="‖J‖ ≤ 2m(1 − m)", lhs=sj.norm, relation="<=",
                             rhs=2 * sj.top * sj.complement, cases=two_atoms)  # fmt: skip
        verdict = structured.check(sj.Logits(2, 1.0), rankwall.backend())
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT
        assert verdict.method.startswith("two-atom lemma")

    def test_bad_declarations_name_the_argument(self, scoped):
        with pytest.raises(rankwall.InputError, match="relation"):
            declare("t.bad", statement="s", lhs=sj.norm, relation="<", rhs=1, cases=sj.rows)
        with pytest.raises(rankwall.InputError, match="id"):
            declare("nodot", statement="s", lhs=sj.norm, relation="<=", rhs=1, cases=sj.rows)
        with pytest.raises(rankwall.InputError, match="cases"):
            declare("t.bad", statement="s", lhs=sj.norm, relation="<=", rhs=1, cases=[])
        with pytest.raises(rankwall.InputError, match="quantity or a number"):
            declare("t.bad", statement="s", lhs="norm", relation="<=", rhs=1, cases=sj.rows)


class TestFromFilesModulesAndEntryPoints:
    def test_a_file_loads_once_and_names_its_origin(self, scoped):
        first = loader.load_claims(str(EXAMPLES))
        assert [c.id for c in first] == ["example.norm-below-1.9", "example.trace-below-one"]
        assert loader.load_claims(str(EXAMPLES)) == first
        assert first[0].origin == str(EXAMPLES.resolve())

    def test_a_missing_or_broken_source_is_bad_input(self, scoped, tmp_path):
        with pytest.raises(rankwall.InputError, match="no file"):
            loader.load_claims(str(tmp_path / "nope.py"))
        broken = tmp_path / "broken.py"
        broken.write_text("raise RuntimeError('boom')\n")
        with pytest.raises(rankwall.InputError, match="failed to load: RuntimeError: boom"):
            loader.load_claims(str(broken))
        with pytest.raises(rankwall.InputError, match="no file or importable module"):
            loader.load_claims("no_such_module_anywhere")

    def test_an_installed_package_contributes_claims_through_an_entry_point(self, scoped, tmp_path, monkeypatch):
        (tmp_path / "my_claims.py").write_text(EXAMPLES.read_text().replace("example.", "pkg."))
        info = tmp_path / "my_claims-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-claims\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text("[rankwall.claims]\nmine = my_claims\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        loaded = loader.load_entry_points()
        assert {c.id for c in loaded} == {"pkg.norm-below-1.9", "pkg.trace-below-one"}
        assert loaded[0].origin.startswith("entry point mine")


class TestTheCommandLineTakesThem:
    def test_search_finds_saves_and_replays_the_false_example(self, capsys, scoped, tmp_path):
        code, out, _ = run(capsys, "search", "--claims", str(EXAMPLES), "example.norm-below-1.9", "--save",
                           str(tmp_path), "--json")  # fmt: skip
        result = json.loads(out)
        assert code == EXIT_VIOLATED and result["found"] and result["saved"]
        assert result["counterexample"]["instance"] == {"case": "runner-up", "V": 2, "m": 0.5, "tail_mass": 0.0}
        saved = json.loads(Path(result["saved"]).read_text())
        assert saved["case"]["m"] == {"rational": "1/2", "float": "0.5"}
        code, out, _ = run(capsys, "replay", result["saved"], "--json")
        assert code == EXIT_VIOLATED and json.loads(out)["status"] == "violated"

    def test_replay_exits_zero_once_the_claim_holds_there(self, capsys, scoped, tmp_path):
        claim = declare("t.below-1.9", statement="‖J‖ ≤ 1.9 m(1 − m)", lhs=sj.norm, relation="<=",
                        rhs=1.9 * sj.top * sj.complement, cases=sj.rows)  # fmt: skip
        from rankwall.checks.run.replay import save

        verdict = claim.check(sj.RunnerUp(2, 0.5), rankwall.backend())
        path = save(verdict, claim, rankwall.backend(), Fraction(1), tmp_path)
        REGISTRY.unregister("t.below-1.9")
        declare("t.below-1.9", statement="‖J‖ ≤ 2.1 m(1 − m)", lhs=sj.norm, relation="<=",
                rhs=2.1 * sj.top * sj.complement, cases=sj.rows)  # fmt: skip
        code, out, _ = run(capsys, "replay", str(path))
        assert code == EXIT_OK and "holds" in out

    def test_replay_refuses_a_bad_file(self, capsys, tmp_path):
        (tmp_path / "x.json").write_text("{}")
        code, _, err = run(capsys, "replay", str(tmp_path / "x.json"))
        assert code == EXIT_USAGE and "not a rankwall-counterexample/1 file" in err
        code, _, err = run(capsys, "replay", str(tmp_path / "nope.json"))
        assert code == EXIT_USAGE and "no file" in err

    def test_verify_and_list_take_the_true_example(self, capsys, scoped):
        code, out, _ = run(capsys, "verify", "--claims", str(EXAMPLES), "example.trace-below-one", "--json")
        assert code == EXIT_OK and json.loads(out)[0]["status"] == "holds"
        code, out, _ = run(capsys, "list", "--claims", str(EXAMPLES), "example.trace-below-one")
        assert code == EXIT_OK and "tr J ≤ 1" in out and "loaded from" in out

    def test_a_search_that_cannot_decide_exits_three_and_names_the_instances(self, capsys, scoped, tmp_path):
        source = tmp_path / "undecided.py"
        source.write_text(
            "from hypothesis import strategies as st\n"
            "from rankwall import Cases, declare, log, softmax_jacobian as sj\n"
            "two = Cases(lambda: st.just(sj.Logits(2, 0.0)), lambda V: [sj.Logits(2, 0.0)])\n"
            "declare('u.attained', statement='H(p) ≥ log 2', lhs=sj.entropy, relation='>=',\n"
            "        rhs=log(2), cases=two)\n"
        )
        code, out, _ = run(capsys, "search", "--claims", str(source), "u.attained", "--budget", "5", "--json")
        result = json.loads(out)
        assert code == EXIT_INCONCLUSIVE and not result["found"]
        assert result["undecided"] == result["examples"] >= 1
        assert result["undecided_instances"][0]["instance"]["case"] == "logits"
        code, out, _ = run(capsys, "search", "--claims", str(source), "u.attained", "--budget", "5")
        assert code == EXIT_INCONCLUSIVE and "undecided" in out and '"case": "logits"' in out

    def test_a_mutant_search_names_the_mutant(self, capsys):
        code, out, _ = run(capsys, "search", "softmax-jacobian.upper-bound", "--mutant", "constant-1.9")
        text = " ".join(out.split())
        assert code == EXIT_VIOLATED
        assert "softmax-jacobian.upper-bound[constant-1.9]" in text and "planted false variant" in text

    def test_a_search_without_a_database_leaves_no_hypothesis_folder(self, tmp_path):
        subprocess.run(
            [sys.executable, "-m", "rankwall.checks.cli", "search", "softmax-jacobian.trace", "--budget", "20"],
            cwd=tmp_path,
            capture_output=True,
            check=True,
            env={**os.environ, "CI": "true"},
        )
        assert not (tmp_path / ".hypothesis").exists()


class TestCasesRebuildFromJson:
    @pytest.mark.parametrize("claim", list(REGISTRY), ids=lambda c: c.id)
    def test_every_witness_round_trips_through_its_exact_json(self, claim):
        for case in claim.witnesses(16):
            assert case_from_json(json.loads(json.dumps(exact_json(case)))) == case
            assert case_from_json(case.to_json()) == case

    def test_an_unknown_kind_or_parameter_is_bad_input(self):
        with pytest.raises(rankwall.InputError, match="unknown kind"):
            case_from_json({"case": "nope"})
        with pytest.raises(rankwall.InputError, match="no parameter 'x'"):
            case_from_json({"case": "runner-up", "V": 2, "m": 0.5, "x": 1})
        with pytest.raises(rankwall.InputError, match="not exactly a float"):
            case_from_json({"case": "runner-up", "V": 2, "m": {"rational": "1/3"}})


PLUGIN_TEST = """
import pytest
from rankwall import declare, softmax_jacobian as sj
from rankwall.testing import assert_holds

declare("mine.trace-below-one", statement="tr J <= 1", lhs=sj.trace, relation="<=", rhs=1, cases=sj.rows)


def test_my_theorem(rankwall_backend):
    assert_holds("mine.trace-below-one", V=[2, 64], backend=rankwall_backend)


def test_a_mutant_is_caught():
    with pytest.raises(AssertionError, match=r"upper-bound\\[constant-1\\.9\\] is violated on .*runner-up"):
        assert_holds("softmax-jacobian.upper-bound[constant-1.9]", V=16)
"""


def test_the_pytest_plugin_runs_a_users_theorems_on_several_backends(tmp_path):
    """A test file in an empty folder, run by plain pytest: assert_holds and rankwall_backend come
    from the plugin rankwall installs (entry point pytest11)."""
    (tmp_path / "test_mine.py").write_text(PLUGIN_TEST)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "test_mine.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "CI": "true"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    passed = int(result.stdout.split(" passed")[0].split()[-1])
    assert passed >= 3, result.stdout  # the theorem on at least two backends, and the mutant
