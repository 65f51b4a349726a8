"""What a researcher met (issue 28, items 1 to 7): finding the quantities, importing the families by
name, functions of quantities, honest errors for statements that cannot be checked, sides printed as
written, pytest helpers, and a cheap plugin. Each test failed on the code before the issue."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

import rankwall
from rankwall import declare
from rankwall import softmax_jacobian as sj
from rankwall.checks.cli import main
from rankwall.checks.engine.verdict import REGISTRY, Certification, Status

ROOT = Path(__file__).resolve().parents[1]
EXIT_OK, EXIT_VIOLATED, EXIT_USAGE = 0, 1, 2


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def scoped():
    """Claims declared by a test are unregistered after it."""
    before = {c.id for c in REGISTRY}
    yield
    for claim in list(REGISTRY):
        if claim.id not in before:
            REGISTRY.unregister(claim.id)


class TestFindingTheQuantities:
    """Item 1: the quantities are listed with their meaning, the cases they read and their exact route."""

    def test_list_quantities_names_each_one(self, capsys):
        code, out, _ = run(capsys, "list", "--quantities", "softmax-jacobian")
        text = " ".join(out.split())
        assert code == EXIT_OK
        assert "rankwall.softmax_jacobian.norm prints as ‖J‖₂" in text
        assert "rows_with_direction" in text and "exactly" in text and "meaning" in text

    def test_list_quantities_as_json(self, capsys):
        code, out, _ = run(capsys, "list", "--quantities", "--json")
        entries = json.loads(out)
        assert code == EXIT_OK and {e["family"] for e in entries} >= {"softmax-jacobian"}
        norm = next(e for e in entries if e["name"] == "rankwall.softmax_jacobian.norm")
        assert norm["cases"] and norm["exactly"] and norm["meaning"]

    def test_an_unknown_family_is_bad_usage(self, capsys):
        code, _, err = run(capsys, "list", "--quantities", "no-such-family")
        assert code == EXIT_USAGE and "--quantities: no family 'no-such-family'" in err


class TestImportingTheFamilies:
    """Item 2: ``import rankwall.<family>`` works; the folders are not packages of their own."""

    def test_a_family_imports_as_a_module(self):
        script = (
            "import rankwall.softmax_jacobian as a\n"
            "from rankwall.softmax_jacobian import norm\n"
            "import rankwall.checks.claims.softmax_jacobian as b\n"
            "assert a is b and norm is b.norm\n"
        )
        subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT / "tests")

    @pytest.mark.parametrize("folder", ["checks", "theory"])
    def test_a_folder_imported_by_its_own_name_is_refused(self, folder):
        result = subprocess.run(
            [sys.executable, "-c", f"import {folder}"], cwd=ROOT, capture_output=True, text=True, check=False
        )
        assert result.returncode != 0 and f"import rankwall.{folder}, not {folder}" in result.stderr


class TestFunctionsOfQuantities:
    """Item 3: sqrt, log, exp, abs, and ‖J‖_F and ‖p‖₂, with exact routes."""

    def test_a_square_root_squared_is_its_radicand_exactly(self, scoped):
        claim = declare("t.root", statement="sqrt(tr J)² = tr J", lhs=rankwall.sqrt(sj.trace) ** 2, relation="==",
                        rhs=sj.trace, cases=sj.rows)  # fmt: skip
        verdict = claim.check(sj.Dirichlet(16, 1.0, 3), rankwall.backend())
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT, verdict.to_json()

    def test_a_fractional_power_is_refused_naming_sqrt(self):
        with pytest.raises(rankwall.InputError, match="sqrt"):
            _ = sj.trace**0.5

    def test_the_frobenius_norm_of_a_rank_one_J_is_its_spectral_norm(self, scoped):
        claim = declare("t.frobenius", statement="‖J‖_F = ‖J‖₂ for two atoms", lhs=sj.frobenius, relation="==",
                        rhs=sj.norm, cases=sj.runner_ups)  # fmt: skip
        verdict = claim.check(sj.RunnerUp(9, 0.7), rankwall.backend())
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT, verdict.to_json()
        other = declare("t.frobenius-dirichlet", statement="‖J‖_F > ‖J‖₂", lhs=sj.frobenius, relation="<=",
                        rhs=sj.norm, cases=sj.rows)  # fmt: skip
        assert other.check(sj.Dirichlet(9, 1.0, 0), rankwall.backend()).status is Status.VIOLATED

    def test_log_and_exp_are_decided_where_their_balls_separate(self, scoped):
        claim = declare("t.entropy-log", statement="H(p) ≤ log V", lhs=sj.entropy, relation="<=",
                        rhs=rankwall.log(sj.vocabulary), cases=sj.rows)  # fmt: skip
        verdict = claim.check(sj.Dirichlet(32, 1.0, 1), rankwall.backend())
        assert verdict.status is Status.HOLDS
        bound = declare("t.exp", statement="exp(H) ≤ V", lhs=rankwall.exp(sj.entropy), relation="<=",
                        rhs=sj.vocabulary, cases=sj.rows)  # fmt: skip
        assert bound.check(sj.Dirichlet(32, 1.0, 1), rankwall.backend()).status is Status.HOLDS
        assert str(bound.sides) == "exp(H(p)) <= V"


class TestHonestErrors:
    """Item 4: a statement that cannot be checked is bad input, named, at declaration or on its cases."""

    def test_a_quantity_of_another_family_is_refused(self):
        with pytest.raises(rankwall.InputError, match="belongs to the family 'heads'"):
            declare("t.mixed", statement="s", lhs=sj.norm, relation="<=", rhs=rankwall.heads.hidden_size,
                    cases=sj.rows, register=False)  # fmt: skip

    def test_a_claims_file_that_declares_nothing_is_refused(self, capsys, tmp_path):
        empty = tmp_path / "nothing.py"
        empty.write_text("x = 1\n")
        code, _, err = run(capsys, "verify", "--claims", str(empty))
        assert code == EXIT_USAGE and "declares no claim" in err

    def test_a_division_by_zero_names_its_side(self, capsys, tmp_path):
        source = tmp_path / "zero.py"
        source.write_text(
            "from rankwall import declare, softmax_jacobian as sj\n"
            "declare('z.zero', statement='s', lhs=sj.trace, relation='<=',\n"
            "        rhs=sj.trace / (sj.vocabulary - sj.vocabulary), cases=sj.rows)\n"
        )
        code, _, err = run(capsys, "verify", "--claims", str(source), "z.zero")
        assert code == EXIT_USAGE and err.count("\n") <= 2
        assert "rhs: tr J / (V - V)" in err and "division by a quantity that is exactly zero" in err

    def test_a_duplicate_id_points_at_the_users_file(self, capsys, tmp_path):
        source = tmp_path / "twice.py"
        source.write_text(
            textwrap.dedent(
                """\
                from rankwall import declare, softmax_jacobian as sj
                declare("d.twice", statement="s", lhs=sj.trace, relation="<=", rhs=1, cases=sj.rows)
                declare("d.twice", statement="s", lhs=sj.trace, relation="<=", rhs=1, cases=sj.rows)
                """
            )
        )
        code, _, err = run(capsys, "verify", "--claims", str(source))
        assert code == EXIT_USAGE and f"{source}, line 3" in err and "declared twice" in err


class TestSidesAsWritten:
    """Item 5: ``rank >= k`` reports the rank as lhs and k as rhs (the old code reported them swapped)."""

    def test_a_lower_bound_keeps_its_sides(self, scoped, capsys):
        claim = declare("t.written", statement="rank J ≥ 2", lhs=sj.rank, relation=">=", rhs=2, cases=sj.rows)
        verdict = claim.check(sj.Uniform(8), rankwall.backend())
        assert (verdict.lhs, verdict.rhs, verdict.margin) == (7.0, 2.0, 5.0), verdict.to_json()
        refuted = declare("t.written-false", statement="rank J ≥ 9", lhs=sj.rank, relation=">=", rhs=9,
                          cases=sj.rows)  # fmt: skip
        from rankwall.testing import assert_holds

        with pytest.raises(AssertionError, match=r"lhs >= rhs with lhs = 1\.0, rhs = 9\.0"):
            assert_holds(refuted, V=8, examples=0)


class TestPytestHelpers:
    """Item 6: ``assert_violated`` returns the shrunk, certified counterexample."""

    def test_assert_violated_returns_the_counterexample(self):
        from rankwall.testing import assert_violated

        found = assert_violated("softmax-jacobian.upper-bound[constant-1.9]")
        assert found.status is Status.VIOLATED and found.certified_by is not None
        assert found.instance.to_json() == {"case": "runner-up", "V": 2, "m": 0.5, "tail_mass": 0.0}

    def test_assert_violated_fails_on_a_true_claim(self):
        from rankwall.testing import assert_violated

        with pytest.raises(AssertionError, match="no counterexample in 20 examples"):
            assert_violated("softmax-jacobian.trace", budget=20)

    def test_allow_inconclusive_is_on_the_conjectures_page(self):
        page = (ROOT / "docs" / "conjectures.md").read_text()
        assert "allow_inconclusive=True" in page and "assert_violated" in page


class TestAssertClose:
    """``assert_close`` checks namespace, dtype, device and shape before values, and says which failed."""

    def test_a_numpy_float64_result_for_a_float32_torch_backend_fails(self):
        import numpy as np

        from rankwall.checks.engine.backends import resolve
        from rankwall.testing import assert_close

        pytest.importorskip("torch")
        backend = resolve("torch", "cpu", "float32")
        desired = np.array([0.25, 0.75])
        with pytest.raises(AssertionError, match=r"^f\(p\): namespace: expected array_api_compat.torch"):
            assert_close(desired.copy(), desired, backend, what="f(p)", operations=2)
        with pytest.raises(AssertionError, match=r"^f\(p\): dtype: expected torch.float32, got torch.float64"):
            assert_close(backend.xp.asarray(desired), desired, backend, what="f(p)", operations=2)
        assert_close(backend.asarray(desired), desired, backend, what="f(p)", operations=2)

    def test_a_wrong_shape_fails(self):
        import numpy as np

        from rankwall.checks.engine.backends import resolve
        from rankwall.testing import assert_close

        backend = resolve("numpy")
        with pytest.raises(AssertionError, match=r"^g\(3\): shape: expected \(3,\), got \(1, 3\)"):
            assert_close(np.zeros((1, 3)), np.zeros(3), backend, what="g(3)", operations=1)

    def test_a_value_beyond_the_bound_fails_naming_the_first_bad_index(self):
        import numpy as np

        from rankwall.checks.engine.backends import resolve
        from rankwall.testing import assert_close
        from rankwall.theory._rounding import gamma

        backend = resolve("numpy")
        desired = np.ones((2, 3))
        actual = desired.copy()
        actual[0, 1] += gamma(4, 2.0**-53) / 2  # within gamma_4
        assert_close(actual, desired, backend, what="h(A)", operations=4)
        actual[0, 2] += 4 * gamma(4, 2.0**-53)  # beyond it
        actual[1, 0] = np.nan  # a NaN where the reference is a number
        with pytest.raises(AssertionError) as failure:
            assert_close(actual, desired, backend, what="h(A)", operations=4)
        message = str(failure.value)
        assert message.startswith("h(A): values: 2 of 6 outside gamma_4")
        assert f"first at index (0, 2): actual {float(actual[0, 2])!r}, desired 1.0" in message

    def test_a_magnitude_per_entry_scales_each_bound(self):
        """An array magnitude (a bound whose scale differs by entry) is broadcast: the same error passes where
        its entry's scale covers it and fails, naming that scale, where it does not."""
        import numpy as np

        from rankwall.checks.engine.backends import resolve
        from rankwall.testing import assert_close
        from rankwall.theory._rounding import gamma

        backend = resolve("numpy")
        desired = np.zeros(2)
        actual = desired + gamma(2, 2.0**-53)  # 1 x gamma_2 on each entry
        assert_close(actual, desired, backend, what="k(x)", operations=2, magnitude=1.0)
        with pytest.raises(
            AssertionError, match=r"^k\(x\): values: 1 of 2 .* max\(\|desired\|, magnitude\[\(1,\)\] = 0\.5\)"
        ):
            assert_close(actual, desired, backend, what="k(x)", operations=2, magnitude=np.array([1.0, 0.5]))

    def test_the_backend_tests_catch_what_to_numpy_let_through(self):
        """Issue 27 item 5: a function that returns the right values as NumPy, or in float64, for a float32 torch
        input passed the old comparison (to_numpy, then np.testing.assert_allclose) and fails assert_close."""
        import numpy as np

        from rankwall.checks.engine.backends import float64_copy, resolve, to_numpy
        from rankwall.testing import assert_close
        from rankwall.theory import softmax_jacobian as sj

        pytest.importorskip("torch")
        backend = resolve("torch", "cpu", "float32")
        p = backend.asarray(sj.construct_dirichlet(20, 1.0, 0))

        def held(p):  # the float32 row in float64, renormalised there
            return float64_copy(p) / float64_copy(p).sum()

        reference = sj.entropy(held(p))
        wrappers = {
            "namespace": lambda p: sj.entropy(held(p)),  # NumPy float64, the right values
            "dtype": lambda p: backend.xp.asarray(sj.entropy(held(p))),  # torch, the right values, float64
        }
        # the bound of tests/test_softmax_jacobian.py::TestQuantitiesOnEveryBackend: gamma_{2(2V+3)} (1 + H)
        within = {"operations": 2 * (2 * 20 + 3), "magnitude": 1 + float(reference)}
        assert_close(sj.entropy(p), reference, backend, what="entropy(p)", **within)
        for check, wrong in wrappers.items():
            np.testing.assert_allclose(to_numpy(wrong(p)), reference, rtol=1e-6)  # the old comparison passes
            with pytest.raises(AssertionError, match=rf"^entropy\(p\): {check}: expected"):
                assert_close(wrong(p), reference, backend, what="entropy(p)", **within)


def test_the_plugin_imports_no_numerical_library():
    """Item 7: pytest imports rankwall.testing in every run where rankwall is installed: it must not pull in
    NumPy, SciPy, python-flint or torch (it cost 0.8 s when it took InputError from a module that imports
    scipy.sparse)."""
    script = (
        "import sys, time, pytest\n"
        "started = time.perf_counter()\n"
        "import rankwall.testing\n"
        "elapsed = time.perf_counter() - started\n"
        "heavy = sorted(m for m in ('numpy', 'scipy', 'flint', 'torch', 'hypothesis') if m in sys.modules)\n"
        "print(heavy, elapsed)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout
    heavy, elapsed = out.rsplit(" ", 1)
    assert heavy == "[]", heavy
    print(f"import rankwall.testing after pytest: {float(elapsed) * 1000:.1f} ms")


def test_fraction_constants_print_as_fractions():
    """A rational constant prints as the fraction it is, (1/3), a float constant as its decimal."""
    assert str(Fraction(1, 3) * sj.top) == "(1/3) * m" and str(1.9 * sj.top) == "1.9 * m"
