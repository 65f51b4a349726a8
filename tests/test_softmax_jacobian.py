"""Tests of theory/softmax_jacobian.py: the quantities, the secular solver and the constructors.

Exact algebra is checked exactly (sympy, python-flint); floating-point results are checked
against certified enclosures with tolerances from rankwall.checks.engine.tolerance.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import replace
from fractions import Fraction

import flint
import mpmath
import numpy as np
import pytest
import sympy

from rankwall.checks import exact
from rankwall.checks.claims import softmax_jacobian as sc
from rankwall.checks.claims.softmax_jacobian import Dirichlet, Logits, RunnerUp, Sparse, Uniform
from rankwall.checks.engine import tolerance
from rankwall.checks.engine.backends import float64_copy, resolve, to_numpy
from rankwall.checks.engine.quantities import Context
from rankwall.checks.engine.verdict import REGISTRY, Certification, Status
from rankwall.checks.exact import softmax as exact_softmax
from rankwall.checks.exact import vectors as exact_vectors
from rankwall.checks.run.search import search
from rankwall.checks.run.strategies import CI_SEARCH_BUDGET
from rankwall.testing import assert_close
from rankwall.theory import softmax_jacobian as sj

#: The secular solver's accuracy claim: within this many ulps of the certified norm.
#: (Measured: at most 8 over Dirichlet rows with V up to 8192 and six decades of concentration.)
SPECTRAL_NORM_ULPS = 16

U64 = 2.0**-53
NUMPY = resolve("numpy")


def dirichlet_rows(V: int, seeds: int = 3) -> list[np.ndarray]:
    return [sj.construct_dirichlet(V, a, seed) for a in (0.01, 0.3, 3.0, 300.0) for seed in range(seeds)]


@pytest.fixture(params=["kernel", "array-api"])
def route(request, monkeypatch):
    """spectral_norm through the compiled kernel (numba) and through the array-API route, which runs
    where numba is not installed."""
    if request.param == "kernel" and sj._compiled_kernel() is None:
        pytest.skip("numba is not installed")
    if request.param == "array-api":
        monkeypatch.setattr(sj, "_compiled_kernel", lambda: None)
    return request.param


@pytest.fixture
def array_route(monkeypatch):
    """The array-API route only (what a machine without numba runs)."""
    monkeypatch.setattr(sj, "_compiled_kernel", lambda: None)


def certified(p: np.ndarray, estimate: float) -> tuple[float, float]:
    lo, hi, method = exact_softmax.certified_norm(exact_softmax.ExactRow.from_probabilities(p), estimate)
    assert method != "undecided", f"no certified enclosure for p={p[:4]}..."
    return lo, hi


class TestSpectralNormIsAccurate:
    """The secular solver is the instrument behind every bound check: it must be exact to ulps."""

    @pytest.mark.parametrize("V", [2, 3, 17, 512, 4096])
    def test_within_a_few_ulps_of_a_certified_enclosure(self, V, route):
        for p in dirichlet_rows(V):
            p = p / p.sum()
            estimate = float(sj.spectral_norm(p))
            lo, hi = certified(p, estimate)
            assert lo <= estimate * (1 + SPECTRAL_NORM_ULPS * U64), (V, lo, estimate)
            assert hi >= estimate * (1 - SPECTRAL_NORM_ULPS * U64), (V, hi, estimate)
            # the enclosure comes from widening the estimate: tight means within the ulps claim
            assert (hi - lo) / estimate <= 2 * SPECTRAL_NORM_ULPS * U64 * 4, (V, lo, hi, estimate)

    @pytest.mark.parametrize("V", [2, 5, 64, 512])
    def test_agrees_with_dense_eigvalsh_within_its_error_model(self, V):
        for p in dirichlet_rows(V):
            estimate = float(sj.spectral_norm(p))
            dense = float(np.linalg.eigvalsh(sj.dense_jacobian(p))[-1])
            allowed = tolerance.dense_eigenvalue_error(V, U64, dense, float(p.max()))
            assert abs(dense - estimate) <= allowed + SPECTRAL_NORM_ULPS * U64 * estimate, (V, p.max())

    def test_dense_route_fails_near_one_hot_where_the_secular_route_does_not(self):
        """A finding: forming J cancels J_kk = m - m^2; the secular solve keeps 2ms exactly."""
        p = sj.construct_dirichlet(2, 0.01, 0)  # about (7e-120, 1)
        secular = float(sj.spectral_norm(p))
        lo, hi = certified(p, secular)
        assert lo <= secular <= hi
        dense = float(np.linalg.eigvalsh(sj.dense_jacobian(p))[-1])
        assert abs(dense - secular) / secular > 1e-6

    def test_batched_rows_match_single_rows(self, route):
        rows = np.stack(dirichlet_rows(300, seeds=2))
        batched = sj.spectral_norm(rows)
        single = np.array([float(sj.spectral_norm(r)) for r in rows])
        np.testing.assert_allclose(batched, single, rtol=4 * U64, atol=0)

    def test_blocks_do_not_change_the_answer(self, monkeypatch, array_route):
        rows = np.stack(dirichlet_rows(64, seeds=2))
        whole = sj.spectral_norm(rows)
        monkeypatch.setattr(sj, "SECULAR_BLOCK_ENTRIES", 64 * 3)
        np.testing.assert_array_equal(sj.spectral_norm(rows), whole)

    def test_ties_one_hot_and_uniform_are_exact(self, route):
        assert float(sj.spectral_norm(sj.construct_tied_atoms(10, 0.25))) == 0.25
        assert float(sj.spectral_norm(np.array([0.0, 1.0, 0.0]))) == 0.0
        assert float(sj.spectral_norm(sj.construct_uniform(7))) == pytest.approx(1 / 7, rel=U64 * 4)


class TestSeedFigures:
    """Seed 002's quoted numbers, reproduced by the code (its 'How tight that is' snippet)."""

    def test_wide_and_narrow_rows_at_m_099(self):
        wide = np.r_[0.99, np.full(63, 0.01 / 63)]
        narrow = np.array([0.99, 0.01])
        assert f"{float(sj.spectral_norm(wide)):.6f}" == "0.010057"
        assert f"{float(sj.spectral_norm(narrow)):.6f}" == "0.019800"
        assert f"{float(sj.lower_bound(wide)):.6f}" == "0.009900"
        assert f"{float(sj.upper_bound(wide)):.6f}" == "0.019800"

    def test_slowdown_ratios(self):
        assert f"{sj.slowdown(0.98):.3f}" == "12.755"
        assert f"{sj.slowdown(0.9999):.2f}" == "2500.25"

    def test_trace_of_the_narrow_row(self):
        narrow = np.array([0.99, 0.01])
        assert f"{float(sj.trace(narrow)):.9f}" == "0.019800000"
        assert f"{float(sj.collision_complement(narrow)):.9f}" == "0.019800000"


class TestIdentitiesAreProvedSymbolically:
    """The algebraic identities hold as polynomial identities on the simplex (sympy)."""

    n = 4

    def symbols(self):
        p = sympy.symbols(f"p0:{self.n}", real=True)
        u = sympy.symbols(f"u0:{self.n}", real=True)
        last = 1 - sum(p[:-1])  # eliminate the constraint sum p = 1
        return [*p[:-1], last], list(u)

    def test_quadratic_form_is_the_variance(self):
        p, u = self.symbols()
        J = sympy.diag(*p) - sympy.Matrix(p) * sympy.Matrix(p).T
        U = sympy.Matrix(u)
        mean = sum(pi * ui for pi, ui in zip(p, u, strict=True))
        variance = sum(pi * (ui - mean) ** 2 for pi, ui in zip(p, u, strict=True))
        assert sympy.expand((U.T * J * U)[0] - variance) == 0

    def test_trace_is_the_collision_complement(self):
        p, _ = self.symbols()
        J = sympy.diag(*p) - sympy.Matrix(p) * sympy.Matrix(p).T
        assert sympy.expand(J.trace() - (1 - sum(pi**2 for pi in p))) == 0

    def test_neither_the_trace_nor_the_entropy_determines_the_other(self):
        """SJ.2: (1/2, 1/2, 0) and (2/3, 1/6, 1/6) share the trace 1/2 (exactly) with different entropies; and
        on p_a = (a, (1-a)/2, (1-a)/2) the entropy crosses log 2 between a = 0.77 and 0.78 (in 50-digit
        arithmetic), where the trace, decreasing in a > 1/3, is at most t(0.77) < 1/2."""
        import mpmath

        def trace(row):
            return 1 - sum(x * x for x in row)

        def entropy(row):
            return -sum(
                mpmath.mpf(x.numerator) / x.denominator * mpmath.log(mpmath.mpf(x.numerator) / x.denominator)
                for x in row
                if x
            )

        half, rival = [Fraction(1, 2), Fraction(1, 2), Fraction(0)], [Fraction(2, 3), Fraction(1, 6), Fraction(1, 6)]
        with mpmath.workdps(50):
            assert trace(half) == trace(rival) == Fraction(1, 2) and entropy(rival) - entropy(half) > mpmath.mpf("0.17")

            def p_a(a):
                return [a, (1 - a) / 2, (1 - a) / 2]

            low, high = Fraction(77, 100), Fraction(78, 100)
            assert entropy(p_a(low)) > mpmath.log(2) > entropy(p_a(high))
            a = sympy.symbols("a")
            assert sympy.diff(1 - a**2 - (1 - a) ** 2 / 2, a) == 1 - 3 * a
            assert trace(p_a(low)) == Fraction(7613, 20000) < Fraction(1, 2)

    def test_constant_direction_is_in_the_kernel(self):
        p, _ = self.symbols()
        J = sympy.diag(*p) - sympy.Matrix(p) * sympy.Matrix(p).T
        assert sympy.expand(J * sympy.ones(self.n, 1)) == sympy.zeros(self.n, 1)

    def test_two_atom_eigenvalue_is_2m_1_minus_m(self):
        m = sympy.symbols("m", positive=True)
        J = sympy.Matrix([[m * (1 - m), -m * (1 - m)], [-m * (1 - m), m * (1 - m)]])
        eigenvalues = {sympy.expand(e) for e in J.eigenvals()}
        assert eigenvalues == {0, sympy.expand(2 * m * (1 - m))}

    def test_secular_function_at_the_bound_vanishes_for_the_runner_up(self):
        m = sympy.symbols("m", positive=True)
        s = 1 - m
        value = sj.secular_function(2 * m * s, m, s, [s])
        assert sympy.simplify(value) == 0


class TestComplementWithoutCancellation:
    """1 - m is a sum of the other entries, so nothing is lost near m = 1."""

    @pytest.mark.parametrize("gap", [30.0, 300.0, 700.0])
    def test_complement_from_logits_is_relatively_accurate(self, gap):
        z = sj.construct_logits(50, gap, offset=1e6, tail_gap=2.0)
        rows = sj.softmax_rows(z)
        with exact.precision(4096):
            w = [(exact.ball(x) - exact.ball(z.max())).exp() for x in z]
            total = sum(w)
            true = float(((total - w[0]) / total).mid())
        assert abs(float(rows.complement[0]) - true) <= 8 * U64 * true

    def test_naive_complement_vanishes_but_ours_does_not(self):
        z = sj.construct_logits(50, 40.0)
        rows = sj.softmax_rows(z)
        assert 1 - float(rows.top[0]) == 0.0  # the naive complement is lost entirely
        assert float(rows.complement[0]) > 0
        assert float(sj.spectral_norm(rows)) <= float(sj.upper_bound(rows)) * (1 + 8 * U64)

    def test_a_one_hot_float_row_has_norm_zero(self):
        """In float64 exp(-746) underflows: as probabilities the row is one-hot, and its norm is 0."""
        rows = sj.softmax_rows(sj.construct_logits(10, 746.0, tail_gap=0.0))
        assert float(rows.complement[0]) == 0.0
        assert float(sj.spectral_norm(np.asarray(rows.p)[0])) == 0.0


def wide_tail_norm(gap: float, tail: int) -> float:
    """||J|| for one logit ``gap`` above ``tail`` equal ones, in 200-digit arithmetic: with
    m = 1/S and equal atoms e = exp(-gap)/S the norm is (tail + 1) m e (the 2x2 block of the
    spread-tail proof, whose discriminant is ((tail + 1) m e)^2 here)."""
    with mpmath.workdps(200):
        w = mpmath.exp(-mpmath.mpf(gap))
        total = 1 + tail * w
        return float((tail + 1) * w / total**2)


class TestTailBelowTheNormalRangeFromLogits:
    """Issue 13 item 5: from logits the scaled tail exp(z_i - z_(2)) and log sigma are kept, so a
    tail whose probabilities underflow still gives its norm (subnormal, but representable)."""

    #: The answer is subnormal, so its rounding is absolute: half a subnormal spacing, plus the
    #: log-space product exp(log sigma + log1p(y)), relatively |log sigma| u ~ 1e-13 (far below one
    #: spacing at 1e-321): one spacing on each side.
    SUBNORMAL_SLACK = 2 * float(np.finfo(np.float64).smallest_subnormal)

    @pytest.mark.parametrize("gap", [744.0, 744.5, 745.0, 746.0])
    def test_gap_past_744_with_a_999_token_tail(self, gap):
        """The old route returned 0.0 at gap 746 (true norm 1.04e-321) and lost 29-93% at 744-745."""
        z = sj.construct_logits(1000, gap, runners=999, tail_gap=0.0)
        got = float(sj.spectral_norm(sj.softmax_rows(z)))
        true = wide_tail_norm(gap, 999)
        assert true > 0 and abs(got - true) <= self.SUBNORMAL_SLACK, (gap, got, true)

    def test_gap_746_is_not_reported_as_zero(self):
        z = sj.construct_logits(1000, 746.0, runners=999, tail_gap=0.0)
        assert float(sj.spectral_norm(sj.softmax_rows(z))) == pytest.approx(1.04e-321, rel=0.01, abs=0)

    def test_a_norm_below_the_subnormal_range_rounds_to_zero(self):
        """Two atoms at gap 746: the norm 2e^-746 ~ 2.1e-324 is nearer 0 than the least subnormal."""
        z = sj.construct_logits(10, 746.0, tail_gap=0.0)
        assert float(sj.spectral_norm(sj.softmax_rows(z))) == 0.0

    @pytest.mark.parametrize(("gap", "runners"), [(30.0, 1), (700.0, 999), (3.0, 50)])
    def test_the_logits_route_agrees_with_the_probability_route_in_the_normal_range(self, gap, runners):
        z = sj.construct_logits(1000, gap, runners=runners, tail_gap=2.0)
        rows = sj.softmax_rows(z)
        from_logits = float(sj.spectral_norm(rows))
        from_p = float(sj.spectral_norm(np.asarray(rows.p)[0]))
        bound = sj.spectral_norm_error_bound(1000, np.float64)
        assert abs(from_logits - from_p) <= 2 * bound * from_p, (from_logits, from_p)


class TestClaimsBelowTheNormalRange:
    """Past a logit gap of ~708 the complement 1 − m is subnormal: the float bound m(1 − m) loses its
    relative precision (at gap 746 it rounded to 0, and "‖J‖ ≥ 1.5 m(1 − m)" was reported to hold).
    The float route then decides nothing and the balls on the exact row decide."""

    CASE = Logits(V=1000, gap=746.0, runners=999)

    @pytest.mark.parametrize(("factor", "status"), [(Fraction(1), Status.HOLDS), (Fraction(101, 100), Status.VIOLATED)])
    def test_the_lower_bound_is_decided_in_balls(self, factor, status):
        verdict = REGISTRY["softmax-jacobian.lower-bound"].check(self.CASE, NUMPY, factor)
        assert verdict.status is status and verdict.method.startswith("interval-"), verdict.to_json()

    @pytest.mark.parametrize("claim", ["softmax-jacobian.upper-bound", "softmax-jacobian.envelope"])
    def test_the_upper_bounds_never_hold_when_halved(self, claim):
        verdict = REGISTRY[claim].check(self.CASE, NUMPY, Fraction(1, 2))
        assert verdict.status is Status.VIOLATED, verdict.to_json()


class TestSolverDoesNotStall:
    def test_a_model_step_an_ulp_past_the_bracket_takes_the_secant(self, monkeypatch, route):
        """Dirichlet(0.5) seed 22 at V = 131,072 has its root 1e-4 below the top pole; the model
        step there lands an ulp outside the bracket, and bisection took 34 steps. The secant of
        the bracket ends finishes it in 3 (the bracketing solver forced, as before the moment route)."""
        p = sj.construct_dirichlet(131072, 0.5, 22)
        monkeypatch.setattr(sj, "MOMENT_ROUTE_MIN_V", 10**9)
        monkeypatch.setattr(sj, "SECULAR_MAX_ITERATIONS", 6)
        norm = float(sj.spectral_norm(p))
        assert float(sj.lower_bound(p)) <= norm <= float(sj.top_probability(p))

    def test_the_probability_route_matches_softmax_rows(self, route):
        rows = np.stack([*dirichlet_rows(4096, seeds=2), sj.construct_runner_up(4096, 0.9)])
        direct = sj.spectral_norm(rows)
        via_rows = sj.spectral_norm(sj.probability_rows(rows))
        bound = sj.spectral_norm_error_bound(4096, np.float64)
        np.testing.assert_allclose(direct, via_rows, rtol=2 * bound, atol=0)


def moment_rows(V: int) -> np.ndarray:
    """Rows of every kind the moment route meets at vocabulary V: Dirichlet over four decades
    (taken), a peaked runner-up row and a two-atom row (handed to the bracketing solver), a tied
    top (closed form), a one-hot row (zero) and three tied runner-ups (poles of multiplicity 3)."""
    runners = np.full(V, 0.1 / (V - 4))
    runners[:4] = (0.3, 0.2, 0.2, 0.2)
    return np.stack(
        [
            *dirichlet_rows(V, seeds=2),
            sj.construct_runner_up(V, 0.9, tail_mass=0.05),
            sj.construct_runner_up(V, 0.75),
            sj.construct_tied_atoms(V, 0.25),
            np.eye(1, V, 3)[0],
            runners / runners.sum(),
        ]
    )


class TestMomentRoute:
    """At V >= MOMENT_ROUTE_MIN_V probability rows are solved from two evaluations of the tail's
    moments (sj._moment_roots), checked against certified enclosures and against the bracketing
    solver, which stays the route for small V and for every row the moments cannot settle."""

    @staticmethod
    def bracketing(rows: np.ndarray, monkeypatch) -> np.ndarray:
        with monkeypatch.context() as patch:
            patch.setattr(sj, "MOMENT_ROUTE_MIN_V", 10**9)
            return sj.spectral_norm(rows)

    @pytest.mark.parametrize("V", [3, 17, 300])
    def test_within_a_few_ulps_of_a_certified_enclosure_at_small_V(self, V, monkeypatch, route):
        """The route forced onto small rows (where no moment bound is easy) keeps the ulps claim."""
        monkeypatch.setattr(sj, "MOMENT_ROUTE_MIN_V", 2)
        for p in moment_rows(V) if V >= 4 else dirichlet_rows(V):
            p = p / p.sum()
            estimate = float(sj.spectral_norm(p))
            if estimate == 0:
                assert p.max() == p.sum()
                continue
            lo, hi = certified(p, estimate)
            assert max(estimate - lo, hi - estimate) <= SPECTRAL_NORM_ULPS * U64 * estimate, (V, p[:3])

    @pytest.mark.parametrize("V", [4096, 131072])
    def test_agrees_with_the_bracketing_solver(self, V, monkeypatch, route):
        rows = moment_rows(V)
        moments = sj.spectral_norm(rows)
        reference = self.bracketing(rows, monkeypatch)
        bound = sj.spectral_norm_error_bound(V, np.float64)
        np.testing.assert_allclose(moments, reference, rtol=2 * bound, atol=0)
        # tie and one-hot in closed form: m/T (T a sum of V entries, then a division) and exactly 0
        tie = rows[-3].max() / math.fsum(rows[-3])
        assert abs(moments[-3] - tie) <= tolerance.gamma(V, U64) * tie and moments[-2] == 0.0

    def test_float32_agrees_with_the_bracketing_solver(self, monkeypatch, route):
        rows = moment_rows(4096).astype(np.float32)
        rows /= rows.sum(axis=1, keepdims=True)
        moments = sj.spectral_norm(rows)
        reference = self.bracketing(rows, monkeypatch)
        # both routes within spectral_norm_error_bound = gamma_{V+8} of the norm: gamma_{2(V+8)} apart
        float32 = resolve("numpy", None, "float32")
        assert_close(moments, reference, float32, what="spectral_norm(moment_rows(4096))", operations=2 * (4096 + 8))

    def test_dirichlet_rows_are_settled_by_the_moments(self, monkeypatch, route):
        """No large Dirichlet row reaches the bracketing solver (the route is what runs): on the
        array-API route its entry point refuses, and the kernel says which route settled each row."""

        def refuse(*args):
            raise AssertionError("a Dirichlet row was handed to the bracketing solver")

        monkeypatch.setattr(sj, "_from_probabilities", refuse)
        rows = np.stack([sj.construct_dirichlet(131072, a, seed) for a in (0.05, 0.5, 5.0) for seed in range(1)])
        if route == "kernel":
            kernel = sj._compiled_kernel()
            _, routes = sj._kernel_solve(kernel, rows)
            assert set(routes.tolist()) <= {kernel.FIRST_MOMENTS, kernel.SECOND_MOMENTS}, routes
        norms = sj.spectral_norm(rows)
        if route != "kernel":
            return  # the array-API route's values are certified in TestAccuracyAgainstTheRoundingModel
        for p, norm in zip(rows, norms, strict=True):
            lo, hi = certified(p, float(norm))
            assert lo * (1 - SPECTRAL_NORM_ULPS * U64) <= norm <= hi * (1 + SPECTRAL_NORM_ULPS * U64)

    def test_the_remainder_bound_is_what_keeps_it_exact(self, monkeypatch, route):
        """With one moment pair and the remainder check disabled (any remainder accepted), the first
        model's root is off by far more than the rounding model allows: the check, not luck, holds
        the accuracy."""
        p = sj.construct_dirichlet(131072, 0.05, 6)
        lo, hi = certified(p, float(sj.spectral_norm(p)))
        monkeypatch.setattr(sj, "FIRST_MOMENTS", 2)
        monkeypatch.setattr(sj, "MOMENT_REMAINDER", math.inf)
        unchecked = float(sj.spectral_norm(p))
        assert max(lo - unchecked, unchecked - hi) / hi > sj.spectral_norm_error_bound(131072, np.float64)

    @pytest.mark.parametrize(
        "planted",
        [
            lambda p: p.__setitem__((1, 7), np.nan),
            lambda p: p.__setitem__((0, 9), -1e-9),
            lambda p: p.__setitem__((1, 2), np.inf),
            lambda p: p.__setitem__((1, slice(None)), p[1] * 1.01),
        ],
        ids=["nan", "negative", "inf", "unnormalised"],
    )
    def test_bad_rows_get_the_validators_error(self, planted, route):
        """The route checks its input from its own passes; a bad row gets validated_probabilities' message."""
        p = np.stack([sj.construct_dirichlet(4096, 0.5, 0), sj.construct_dirichlet(4096, 0.5, 1)])
        planted(p)
        with pytest.raises(sj.InputError) as expected:
            sj.validated_probabilities(p, "p")
        with pytest.raises(sj.InputError) as got:
            sj.spectral_norm(p)
        assert str(got.value) == str(expected.value)

    def test_torch_cpu_runs_the_route_on_its_numpy_view(self, route):
        torch = pytest.importorskip("torch")
        rows = moment_rows(4096)
        got = sj.spectral_norm(torch.asarray(rows))
        # the same arithmetic on the same float64 values: equal (no rounding left, gamma_0 = 0)
        torch_cpu = resolve("torch", "cpu", "float64")
        assert_close(got, sj.spectral_norm(rows), torch_cpu, what="spectral_norm(moment_rows(4096))", operations=0)


class TestAccuracyAgainstTheRoundingModel:
    """The docs' accuracy claim is the model's bound gamma_{V+8} (spectral_norm_error_bound);
    measured against certified enclosures at the largest V, in float64 and float32."""

    @staticmethod
    def error(p: np.ndarray) -> float:
        estimate = float(sj.spectral_norm(p))
        lo, hi = certified(p.astype(np.float64), estimate)
        return max(estimate - lo, hi - estimate) / estimate

    @pytest.mark.parametrize(
        ("route", "concentration"),
        [("kernel", 0.05), ("kernel", 0.5), ("kernel", 5.0), ("array-api", 0.5)],
        indirect=["route"],
    )
    def test_float64_at_V_131072(self, concentration, route):
        p = sj.construct_dirichlet(131072, concentration, 1)
        assert self.error(p) <= sj.spectral_norm_error_bound(131072, np.float64)

    @pytest.mark.parametrize(
        ("route", "concentration"), [("kernel", 0.05), ("kernel", 5.0), ("array-api", 0.05)], indirect=["route"]
    )
    def test_float32_at_V_4096(self, concentration, route):
        p = sj.construct_dirichlet(4096, concentration, 1).astype(np.float32)
        assert self.error(p) <= sj.spectral_norm_error_bound(4096, np.float32)

    def test_the_bound_is_the_claim_layers_tolerance(self):
        for V, dtype in ((2, np.float64), (131072, np.float64), (4096, np.float32)):
            u = tolerance.unit_roundoff(dtype)
            assert sj.spectral_norm_error_bound(V, dtype) == tolerance.spectral_norm_tolerance(V, u, 1.0)


def kernel_rows(V: int) -> np.ndarray:
    """Rows for the kernel's routes at V: :func:`moment_rows`, a two-atom row, a row whose runner-up
    is 2^-40 of its top (the far stand-in pole) and a row with zeros."""
    far = np.zeros(V)
    far[:3] = (1.0, 2.0**-40, 2.0**-42)
    return np.stack([*moment_rows(V), sj.construct_runner_up(V, 0.6), far / far.sum(), sj.construct_sparse(V, 3, 4)])


class TestCompiledKernel:
    """theory/_secular_kernel.py against the array-API route it fuses (the slow, plainly vectorised
    reference, itself checked against certified enclosures above): the same values within the
    rounding model's bound, the same route per row, in float64 and float32, and a working fallback
    where numba is missing."""

    @pytest.fixture
    def kernel(self):
        kernel = sj._compiled_kernel()
        if kernel is None:
            pytest.skip("numba is not installed")
        return kernel

    @staticmethod
    def array_route(rows: np.ndarray, monkeypatch) -> np.ndarray:
        with monkeypatch.context() as patch:
            patch.setattr(sj, "_compiled_kernel", lambda: None)
            return sj.spectral_norm(rows)

    @pytest.mark.parametrize(
        ("V", "dtype"),
        [
            (2, np.float64),
            (300, np.float64),
            (4096, np.float64),
            (131072, np.float64),
            (300, np.float32),
            (4096, np.float32),
        ],
    )
    def test_matches_the_array_route(self, kernel, V, dtype, monkeypatch):
        rows = (np.stack(dirichlet_rows(V)) if V < 4 else kernel_rows(V)).astype(dtype)
        rows = np.stack([r / r.sum() for r in rows])
        got = sj.spectral_norm(rows)
        reference = self.array_route(rows, monkeypatch)
        # both routes within spectral_norm_error_bound = gamma_{V+8} of the norm: gamma_{2(V+8)} apart
        on = resolve("numpy", None, np.dtype(dtype).name)
        assert_close(got, reference, on, what=f"spectral_norm(kernel_rows({V}))", operations=2 * (V + 8))

    @staticmethod
    def first_pass(kernel, row: np.ndarray) -> tuple:
        """The kernel's first pass and what it finds from it: ``(maxima, low, total, m, sigma, k)``."""
        F = row.dtype.type
        maxima = np.empty(row.shape[0] // kernel.BLOCK + 1, row.dtype)
        low, total = kernel._first_pass(row, maxima, F)
        return (maxima, low, total, *kernel._top_two(row, maxima, F))

    @pytest.mark.parametrize("V", [2, 17, 300, 4099, 131072])
    def test_the_first_pass_finds_the_top_two(self, kernel, V):
        """From the block maxima and one block: the largest entry, its first index and the largest of
        the others (the largest itself at a tie), wherever they lie (one block, two, the short last
        one); the least entry (the zeros padding the last lanes included, as only low >= 0 is asked) and
        the total within 2u."""
        rng = np.random.default_rng(V)
        for case in range(6):
            row = rng.random(V)
            i, j = rng.choice(V, 2, replace=False)
            if case == 1:  # a tie far apart
                row[[i, j]] = 2.0
            elif case == 2:  # top and runner-up side by side
                row[0], row[min(1, V - 1)] = 2.0, 1.9
            elif case == 3:  # top in the last (short) block
                row[-1] = 2.0
            elif case == 4:  # runner-up in the last block, top in the first
                row[0], row[-1] = 2.0, 1.9
            elif case == 5:  # a tie between the first and the last entry
                row[0] = row[-1] = 2.0
            _, low, total, m, sigma, k = self.first_pass(kernel, row)
            assert (m, k, sigma) == (row.max(), int(np.argmax(row)), np.sort(row)[-2]), case
            assert low == min(row.min(), 0.0)  # the padding's zeros count: only low >= 0 is asked
            assert abs(total - math.fsum(row)) <= 2 * U64 * math.fsum(row)

    def test_the_near_list_keeps_the_largest_entries(self, kernel):
        """``_largest_above``: the entries above the threshold but the top one, the largest first, as
        many as the list holds; ``dropped`` is the largest it left out (the threshold when none)."""
        V, size = 4096, kernel.NEAR_ENTRIES
        rng = np.random.default_rng(0)
        values = np.arange(1, size + 19) / 100.0  # more than the list holds
        row = np.full(V, 1e-3)
        places = rng.choice(V, values.size + 1, replace=False)
        row[places[0]], row[places[1:]] = 1.0, values
        maxima, *_, k = self.first_pass(kernel, row)
        assert k == places[0]
        near = np.empty(size)
        count, dropped = kernel._largest_above(row, maxima, k, 0.005, near, np.float64)
        assert count == size and list(near) == sorted(values)[::-1][:size] and dropped == sorted(values)[::-1][size]
        count, dropped = kernel._largest_above(row, maxima, k, 0.3, near, np.float64)
        assert list(near[:count]) == sorted(values[values > 0.3])[::-1] and dropped == 0.3

    def test_the_entries_nearest_the_top_pole_are_added_exactly(self, kernel):
        """Peaked rows whose six moments about the top pole do not settle them (the remainder bound is
        missed): the kernel adds the few entries nearest the pole exactly (five equal ones in the last
        row) and settles each at the first centre, within the solver's ulps of a certified enclosure."""
        F, u = np.float64, U64
        rows = [sj.construct_dirichlet(131072, 0.05, seed) for seed in (0, 3)]
        tied = rows[1].copy()
        order = np.argsort(tied)[::-1]
        tied[order[2:7]] = tied[order[2]]
        rows.append(tied / tied.sum())
        for p in rows:
            maxima, _, total, m, sigma, k = self.first_pass(kernel, p)
            m2, count, share = m * m, sj.FIRST_MOMENTS, F(sj.MOMENT_REMAINDER)
            gap = (m - sigma) * (1 - u)
            assert m2 <= sj.MOMENT_REACH * total * gap  # the route takes the row
            plain = kernel._moments(p, sigma, m, F)  # no split: every tail entry in the series
            near = np.empty(kernel.NEAR_ENTRIES)
            z, converged = kernel._model_root(
                m2, total, 0.0, plain, count, m, near, 0, m2 / (total + plain[0]), u, 12, F
            )
            assert converged and not kernel._series_is_exact(z, 0.0, gap, plain, count, total, share, u, F)
            above, nearby = kernel._split(p, maxima, m, k, sigma, m2 / total, count, share * u * total / 4, near, F)
            assert nearby > 0 and above < sigma
            norms, routes = sj._kernel_solve(kernel, p[None, :])
            assert routes[0] == kernel.FIRST_MOMENTS
            lo, hi = certified(p, float(norms[0]))
            assert lo * (1 - SPECTRAL_NORM_ULPS * U64) <= norms[0] <= hi * (1 + SPECTRAL_NORM_ULPS * U64)

    def test_each_row_takes_the_route_it_should(self, kernel):
        """Dirichlet rows by the moments, the peaked and two-atom rows by bracketing, the tie and the
        one-hot row in closed form; below MOMENT_ROUTE_MIN_V every open row by bracketing."""
        rows = kernel_rows(131072)
        _, routes = sj._kernel_solve(kernel, rows)
        moments = {kernel.FIRST_MOMENTS, kernel.SECOND_MOMENTS}
        expected = [moments] * 8 + [{kernel.BRACKETING}] * 2 + [{kernel.CLOSED}] * 2
        expected += [{kernel.BRACKETING}] * 4  # three tied runner-ups (m^2 > T g / 4), two atoms, far, sparse
        assert [r in e for r, e in zip(routes.tolist(), expected, strict=True)] == [True] * len(expected), routes
        _, small = sj._kernel_solve(kernel, kernel_rows(300))
        assert set(small.tolist()) == {kernel.BRACKETING, kernel.CLOSED}

    def test_an_unconverged_row_is_an_error_not_a_norm(self, kernel, monkeypatch):
        monkeypatch.setattr(sj, "SECULAR_MAX_ITERATIONS", 1)
        with pytest.raises(ArithmeticError, match="did not converge"):
            sj.spectral_norm(sj.construct_runner_up(64, 0.9, tail_mass=0.05))

    def test_a_row_at_the_edge_of_the_tolerance_goes_to_the_validator(self, kernel, monkeypatch):
        """A row summing to 1 + 3/4 of the tolerance: the kernel leaves it (its own sum, in its order,
        is trusted only within half), validated_probabilities accepts it, the array-API route solves it."""
        V = 64
        p = sj.construct_dirichlet(V, 0.5, 2)
        p = p * (1 + 0.75 * sj.normalization_tolerance(V, 2 * U64))
        _, routes = sj._kernel_solve(kernel, p[None, :])
        assert routes[0] == kernel.INVALID
        assert float(sj.spectral_norm(p)) == float(self.array_route(p, monkeypatch))

    def test_without_numba_the_array_route_runs(self, monkeypatch):
        """numba missing (its import fails): spectral_norm takes the array-API route."""
        import sys

        import rankwall.theory

        monkeypatch.setitem(sys.modules, "numba", None)
        monkeypatch.delitem(sys.modules, "rankwall.theory._secular_kernel", raising=False)
        monkeypatch.delattr(rankwall.theory, "_secular_kernel", raising=False)
        sj._compiled_kernel.cache_clear()
        try:
            assert sj._compiled_kernel() is None
            rows = kernel_rows(4096)
            np.testing.assert_allclose(
                sj.spectral_norm(rows),
                [float(sj.spectral_norm(sj.probability_rows(r))) for r in rows],
                rtol=2 * sj.spectral_norm_error_bound(4096, np.float64),
                atol=0,
            )
        finally:
            monkeypatch.undo()
            sj._compiled_kernel.cache_clear()

    @pytest.mark.slow
    def test_the_compiled_code_keeps_the_rounding_model(self, kernel, monkeypatch, tmp_path):
        """Compiled afresh (numba cannot show cached code): no fast-math flag, no fused multiply-add,
        the float32 code does no float64 arithmetic, and the first pass and the moment pass run in SIMD
        lanes (about a minute of compilation on a loaded machine)."""
        import importlib.util
        import re

        import numba.core.config

        monkeypatch.setattr(numba.core.config, "CACHE_DIR", str(tmp_path))
        spec = importlib.util.spec_from_file_location("fresh_secular_kernel", kernel.__file__)
        fresh = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(fresh)
        for dtype in (np.float32, np.float64):
            rows = kernel_rows(300).astype(dtype)
            rows = np.stack([r / r.sum() for r in rows])
            monkeypatch.setattr(sj, "_compiled_kernel", lambda fresh=fresh: fresh)
            sj.spectral_norm(rows)
        for signature, ir in fresh.spectral_norms.inspect_llvm().items():
            arithmetic = re.findall(r"= (?:fadd|fsub|fmul|fdiv|frem|fneg|fcmp)\b[^\n]*", ir)
            assert any("<" in line for line in arithmetic), "no SIMD arithmetic"  # the loops are vectorised
            # the two passes every large row takes run in SIMD lanes (a loop the compiler unrolls before
            # vectorising stays scalar: correct, but several times slower)
            for name, simd in (("_first_pass", r"= fadd (?:\w+ )*<"), ("_moments", r"= fdiv (?:\w+ )*<")):
                bodies = [f for f in ir.split("\ndefine ")[1:] if f"{len(name)}{name}B" in f.split("\n", 1)[0]]
                assert bodies and all(re.search(simd, body) for body in bodies), name
            fast_math = r"\b(fast|reassoc|nnan|ninf|nsz|arcp|contract|afn)\b"
            flagged = [line for line in arithmetic if re.search(fast_math, line)]
            assert not flagged, flagged[:3]
            assert not re.search(r"@llvm\.(fma|fmuladd)\.", ir)
            if "float32" in str(signature[0]):
                assert not [line for line in arithmetic if re.search(r"\bdouble\b", line)]
                assert "fpext" not in ir


def held_rows(backend, x) -> np.ndarray:
    """The rows a backend array holds, read exactly into float64 NumPy: the exact input of what the backend
    computes from them. In float64 they are the rows it was given; rounded to float32 they no longer sum to
    one, and are renormalised in float64 (as every quantity renormalises; u = 2^-53 there, far below float32's)."""
    held = float64_copy(x)
    return held if backend.dtype_name == "float64" else held / held.sum(axis=-1, keepdims=True)


class TestQuantitiesOnEveryBackend:
    """The same code runs on NumPy, PyTorch, array-API-strict (and CuPy/CUDA when present): each result is
    an array of the backend's namespace, dtype and device (assert_close), and within the rounding model of
    the float64 NumPy value on the rows the backend holds. That reference obeys the same model at
    u = 2^-53 <= u, so the two differ by at most twice the model's bound: gamma_n + gamma_n <= gamma_2n.
    The quantities read the row normalised, each entry carrying gamma_V (a sum of V entries, one division)."""

    def test_spectral_norm_matches_numpy(self, backend):
        V = 33
        rows = backend.asarray(np.stack([*dirichlet_rows(V, seeds=1), sj.construct_runner_up(V, 0.9)]))
        reference = sj.spectral_norm(held_rows(backend, rows))
        # spectral_norm_error_bound: gamma_{V+8}, relative, for the backend's value and for the reference
        assert tolerance.gamma(2 * (V + 8), tolerance.unit_roundoff(backend.dtype)) >= 2 * sj.spectral_norm_error_bound(
            V, backend.dtype
        )
        what = f"spectral_norm(rows {tuple(rows.shape)})"
        assert_close(sj.spectral_norm(rows), reference, backend, what=what, operations=2 * (V + 8))

    def test_jvp_matches_the_dense_product(self, backend):
        V = 20
        p = backend.asarray(sj.construct_dirichlet(V, 1.0, 0))
        u = backend.asarray(sj.construct_direction(V, 1))
        q, v = held_rows(backend, p), float64_copy(u)
        # Ju_i = q_i (u_i - <q, u>) and (diag(q) - qq^T)u alike carry gamma_{2V+2} q_i (|u_i| + <q, |u|>)
        # (q_i's gamma_V, then V products summed and two roundings), each side
        scale = float(np.max(q * (np.abs(v) + q @ np.abs(v))))
        dense = sj.dense_jacobian(q) @ v
        assert_close(sj.jvp(p, u), dense, backend, what="jvp(p, u)", operations=2 * (2 * V + 2), magnitude=scale)
        # J_ij = q_i [i = j] - q_i q_j: q_i's gamma_V twice, a product and a difference, on q_i (1 + q_i) at most
        scale = float(np.max(q * (1 + q)))
        operations = 2 * (2 * V + 2)
        assert_close(
            sj.dense_jacobian(p),
            sj.dense_jacobian(q),
            backend,
            what="dense_jacobian(p)",
            operations=operations,
            magnitude=scale,
        )

    def test_variance_equals_quadratic_form(self, backend):
        V = 100
        p = backend.asarray(sj.construct_dirichlet(V, 0.5, 3))
        u = backend.asarray(sj.construct_direction(V, 4, offset=3.0))
        q, v = held_rows(backend, p), float64_copy(u)
        second = float(np.sum(q * v * v))
        reference = sj.variance(q, v)
        # quadratic_form_tolerance(V, u, second) = 2 gamma_{V+5} 2 E[u^2]: each side within half of it, so
        # gamma_{2(V+5)} 2 E[u^2] covers the backend's value of either form against the float64 variance
        eps = tolerance.unit_roundoff(backend.dtype)
        assert tolerance.gamma(2 * (V + 5), eps) * 2 * second >= tolerance.quadratic_form_tolerance(V, eps, second)
        for name in ("quadratic_form", "variance"):
            got = getattr(sj, name)(p, u)
            assert_close(got, reference, backend, what=f"{name}(p, u)", operations=2 * (V + 5), magnitude=2 * second)

    def test_trace_is_not_the_entropy(self, backend):
        V = 16
        p = backend.asarray(sj.construct_dirichlet(V, 1.0, 0))
        q = held_rows(backend, p)
        # tr J = sum_i q_i (1 - q_i) (top: m s): V positive terms of q_i's gamma_V and at most V + 3 roundings
        # more (s a sum of V - 1 of them): relative gamma_{2V+3}. 1 - sum q^2 = s(1 + m) - sum_{i != k} q_i^2:
        # gamma_{2V+3} of s(1 + m) + sum q_i^2 <= 3s <= 3 (1 - sum q^2), so 3 gamma_{2V+3} relative
        operations = 2 * (2 * V + 3)
        complement = sj.collision_complement(q)
        # the identity tr J = 1 - sum q^2 on the backend: gamma_{2V+3} + 3 gamma_{2V+3} <= gamma_{4(2V+3)}
        assert_close(sj.trace(p), complement, backend, what="trace(p)", operations=2 * operations)
        assert_close(
            sj.collision_complement(p),
            complement,
            backend,
            what="collision_complement(p)",
            operations=operations,
            magnitude=3 * float(complement),
        )
        # -sum q log q: gamma_{2V+3} q_i (|log q_i| + 1) per term (log q_i off by q_i's relative gamma_V, absolutely)
        entropy = sj.entropy(q)
        what = "entropy(p)"
        assert_close(sj.entropy(p), entropy, backend, what=what, operations=operations, magnitude=1 + float(entropy))
        assert abs(float(complement) - float(entropy)) > 0.1

    def test_support_and_envelope(self, backend):
        V = 12
        p = backend.asarray(sj.construct_sparse(V, 5, 0))
        assert int(to_numpy(sj.support_size(p))) == 5  # an integer count, in the backend's integer dtype
        q = backend.asarray(sj.construct_tied_atoms(V, 0.3))
        # min(m, 2ms): m is q_top (gamma_V), s a sum of V - 1 tail entries, two products: gamma_{2V+1}
        reference = sj.envelope(held_rows(backend, q))
        assert float(reference) == pytest.approx(0.3, rel=1e-6)
        assert_close(sj.envelope(q), reference, backend, what="envelope(q)", operations=2 * (2 * V + 1))


class TestConstructorsBuildWhatTheySay:
    def test_runner_up_attains_the_upper_bound(self):
        for m in (0.5, 0.6, 0.99, 1 - 1e-12):
            p = sj.construct_runner_up(40, m)
            assert float(sj.spectral_norm(p)) == pytest.approx(2 * m * (1 - m), rel=8 * U64)

    def test_spread_tail_approaches_the_lower_bound(self):
        for V in (3, 64, 4096):
            p = sj.construct_spread_tail(V, 0.9)
            norm = float(sj.spectral_norm(p))
            assert 0.9 * 0.1 <= norm <= sj.spread_tail_ceiling(0.9, V - 1) * (1 + 8 * U64)

    def test_rows_sum_to_one(self):
        for p in (
            sj.construct_runner_up(9, 0.7, tail_mass=0.1),
            sj.construct_tied_atoms(9, 0.2),
            sj.construct_spread_tail(9, 0.5),
            sj.construct_dirichlet(9, 0.1, 3),
            sj.construct_sparse(9, 4, 1),
        ):
            assert math.isclose(p.sum(), 1.0, rel_tol=16 * U64)
            assert (p >= 0).all()


# --------------------------------------------------------------------------- the claims

SPARSE_1024 = Sparse(V=1024, support=700, seed=0)
DIRICHLET_64 = Dirichlet(V=64, concentration=1.0, seed=0)


class TestRankIsMeasuredFromJ:
    """rank J is certified from J's structure (zero rows, the kernel vector 1, interlacing) or its
    eigenvalues, never read off the claim's own right side |supp p| − 1."""

    @pytest.mark.parametrize(
        ("instance", "certified_by", "lower"),
        [(SPARSE_1024, Certification.EXACT, "interlacing"), (DIRICHLET_64, Certification.TWO_SIDED, "eigvalsh")],
    )
    def test_the_claim_holds_by_a_certified_point(self, instance, certified_by, lower):
        """Both ends meet at |supp p| − 1: interlacing (exact) at V = 1024, eigvalsh (two-sided) at V = 64."""
        verdict = REGISTRY["softmax-jacobian.rank"].check(instance, NUMPY)
        assert verdict.status is Status.HOLDS and verdict.certified_by is certified_by, verdict.to_json()
        assert f"lower from {'' if lower == 'interlacing' else '64x64 '}{lower}" in verdict.method
        assert verdict.lhs == verdict.rhs == (instance.support if isinstance(instance, Sparse) else 64) - 1

    @pytest.mark.parametrize("shift", [1, -1])
    def test_a_planted_support_count_never_holds(self, monkeypatch, shift):
        """The right side planted off by one at V = 1024: the rank measured from J disagrees."""
        real = sc.support.measure_fn

        def shifted(ctx):
            count = real(ctx)
            return replace(count, lo=count.lo + shift, hi=count.hi + shift)

        monkeypatch.setattr(sc.support, "measure_fn", shifted)
        monkeypatch.setattr(sc.support, "exact_fn", shifted)
        verdict = REGISTRY["softmax-jacobian.rank"].check(SPARSE_1024, NUMPY)
        assert verdict.status is Status.VIOLATED and verdict.lhs == 699, verdict.to_json()
        assert verdict.certified_by is Certification.EXACT  # the rank pinned at 699 by exact ends

    @pytest.mark.parametrize("instance", [SPARSE_1024, DIRICHLET_64])
    def test_a_planted_rank_certificate_never_holds(self, monkeypatch, instance):
        """The structural certificate planted one too high (in the float and the exact routes)."""
        real = sc.interlacing_rank
        monkeypatch.setattr(sc, "interlacing_rank", lambda row: (lambda lo, hi, c: (lo + 1, hi + 1, c))(*real(row)))
        verdict = REGISTRY["softmax-jacobian.rank"].check(instance, NUMPY)
        assert verdict.status is Status.VIOLATED, verdict.to_json()

    def test_the_structure_matches_the_exact_rank(self):
        """interlacing_rank against python-flint's rank over Q on rows with ties, zeros and one-hots."""
        for p in (
            [0.5, 0.25, 0.25, 0.0],
            [1.0, 0.0, 0.0],
            [0.2, 0.2, 0.2, 0.2, 0.2],
            list(sj.construct_sparse(12, 5, 1)),
            list(sj.construct_dirichlet(9, 0.05, 2)),
        ):
            row = exact_softmax.ExactRow.from_probabilities(p)
            lo, hi, _ = sc.interlacing_rank(row)
            q = [exact.rational(x) for x in p]
            total = sum(q, start=exact.rational(0.0))
            q = [x / total for x in q]
            n = len(q)
            J = [(qi if i == j else 0) - qi * qj for i, qi in enumerate(q) for j, qj in enumerate(q)]
            assert lo == hi == flint.fmpq_mat(n, n, J).rank(), p

    @pytest.mark.parametrize("instance", [SPARSE_1024, DIRICHLET_64, RunnerUp(V=8, m=0.75, tail_mass=0.0)])
    def test_the_mutant_rank_V_is_refuted_by_the_upper_end(self, instance):
        """The kernel vector 1 caps the rank at V − 1, so "rank J = V" is refuted (by the exact rank
        pinned below V on the exact row)."""
        verdict = REGISTRY["softmax-jacobian.rank"].mutants["equals-V"].check(instance, NUMPY)
        assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.EXACT
        assert verdict.lhs < instance.V and "upper from" in verdict.method, verdict.method


class TestKernelIsMeasuredThroughTheProduct:
    """J·1 = 0 is measured as the O(V) product J·1 and evaluated exactly as the product p̂_i(1 − Σ_j p̂_j),
    not read off 1 − Σp."""

    def test_a_planted_jacobian_that_does_not_annihilate_1_never_holds(self, monkeypatch):
        """J planted as diag(p) − ppᵀ/2 in the float product and in the exact one: J·1 = p/2."""
        real_float = sj.jvp

        def planted_float(p, u):
            rows = sj.probability_rows(p)
            return real_float(p, u) + rows.p * rows.xp.sum(rows.p * u, axis=-1, keepdims=True) / 2

        monkeypatch.setattr(sj, "jvp", planted_float)
        monkeypatch.setattr(sc.kernel_residual, "exact_fn", lambda ctx: sc._exact_top(ctx) / 2)
        for instance in (RunnerUp(V=5, m=0.75, tail_mass=0.0), SPARSE_1024):
            verdict = REGISTRY["softmax-jacobian.kernel"].check(instance, NUMPY)
            assert verdict.status is Status.VIOLATED, verdict.to_json()

    @pytest.mark.parametrize("case", [Uniform(V=4), Logits(V=7, gap=745.0, runners=2, tail_gap=3.0)])
    def test_the_exact_residual_is_exactly_zero(self, case):
        """On a row of probabilities the residual is the rational 0; on a softmax of logits it is 0 as an
        identity in the weights of the logits, never a ball around 0."""
        ctx = Context(case, NUMPY)
        with exact.precision(128):
            value = sc.kernel_residual.exact(ctx)
        assert value.rational and value.value == 0, value

    def test_the_mutant_J_p_is_zero_is_refuted(self):
        """(Jp)_i = p_i(p_i − Σ p_j²) ≠ 0 for the runner-up row, measured and judged as the product."""
        verdict = (
            REGISTRY["softmax-jacobian.kernel"]
            .mutants["annihilates-p"]
            .check(RunnerUp(V=1024, m=0.75, tail_mass=0.0), NUMPY)
        )
        assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.EXACT, verdict.to_json()
        assert verdict.lhs == pytest.approx(0.75 * (0.75 - 0.625), rel=1e-12)


EXACT_CASES = [
    RunnerUp(V=7, m=0.75, tail_mass=0.1),
    Sparse(V=40, support=9, seed=2),
    Dirichlet(V=64, concentration=0.01, seed=3),
    Dirichlet(V=300, concentration=5.0, seed=4),
    Uniform(V=5),
]


def _listed_moments(p, u, zero):
    """The slow reference: (uᵀJu as Σ u_i (Ju)_i, Var_p(u) two-pass, E_p[u²]) from lists of rationals."""
    mean = sum((pi * ui for pi, ui in zip(p, u, strict=True)), start=zero)
    jvp = [pi * (ui - mean) for pi, ui in zip(p, u, strict=True)]
    form = sum((ui * ji for ui, ji in zip(u, jvp, strict=True)), start=zero)
    variance = sum((pi * (ui - mean) ** 2 for pi, ui in zip(p, u, strict=True)), start=zero)
    return form, variance, sum((pi * ui * ui for pi, ui in zip(p, u, strict=True)), start=zero)


class TestVectorisedExactArithmetic:
    """checks/exact/vectors.py and the exact routes of the quantities against lists of python-flint
    rationals (one per entry, the slow and obviously right reference) at small V: the same rationals."""

    @pytest.mark.parametrize("case", EXACT_CASES, ids=lambda c: f"{c.KIND}-{c.V}")
    @pytest.mark.parametrize(("seed", "offset"), [(0, 0.0), (3, 1e4), (5, -1e8)])
    def test_quadratic_moments_match_the_lists(self, case, seed, offset):
        case = replace(case, direction_seed=seed, direction_offset=offset)
        built = sc.rebuilt(case)
        q = [exact.rational(x) for x in built.raw]
        total = sum(q, start=flint.fmpq(0))
        p = [x / total for x in q]
        u = [exact.rational(x) for x in to_numpy(built.direction)[0]]
        listed = _listed_moments(p, u, flint.fmpq(0))
        assert exact_vectors.quadratic_moments(built.raw, to_numpy(built.direction)[0]) == listed
        ctx = Context(case, NUMPY)
        quantities = (sc.quadratic_form, sc.variance, sc.second_moment)
        assert tuple(q.exact(ctx).value for q in quantities) == listed

    @pytest.mark.parametrize("case", EXACT_CASES, ids=lambda c: f"{c.KIND}-{c.V}")
    def test_trace_and_products_match_the_lists(self, case):
        built = sc.rebuilt(case)
        q = [exact.rational(x) for x in built.raw]
        total = sum(q, start=flint.fmpq(0))
        p = [x / total for x in q]
        zero = flint.fmpq(0)
        ctx = Context(case, NUMPY)
        assert sc.trace.exact(ctx).value == sum((x * (1 - x) for x in p), start=zero)
        assert sc.collision_complement.exact(ctx).value == 1 - sum((x * x for x in p), start=zero)
        collision = sum((x * x for x in p), start=zero)
        assert sc.product_with_p.exact(ctx).value == max(abs(x * (x - collision)) for x in p)

    def test_a_row_is_read_exactly(self):
        """Every float, subnormal and huge exponents alike, is its integer times the common power of two."""
        x = np.array([0.0, 5e-324, 1.5, -(2.0**-1070), 0.1, 1e300, -3.0])
        row = exact_vectors.Dyadic.of(x)
        assert [row.rational(int(n)) for n in row.integers] == [exact.rational(v) for v in x]

    def test_psd_near_tie_at_2_to_the_20(self):
        """Issue 22's slow case, a psd re-decision at V = 2^20 (841 s as lists), in exact rationals."""
        case = replace(sc.Dirichlet(V=2**20, concentration=0.5, seed=0), direction_seed=1, direction_offset=1e4)
        started = time.perf_counter()
        judgement = REGISTRY["softmax-jacobian.psd"].judge_exactly(case, Fraction(1))
        assert judgement.sign == 1 and judgement.certified_by is Certification.EXACT
        assert judgement.method.startswith("exact-rational")
        assert time.perf_counter() - started < 120  # a generous ceiling on a shared machine


MUTANTS = [(c.id, name) for c in REGISTRY if c.id.startswith("softmax-jacobian.") for name in c.mutants]


def test_every_claim_has_a_mutant():
    assert {c for c, _ in MUTANTS} == {c.id for c in REGISTRY if c.id.startswith("softmax-jacobian.")}


@pytest.mark.parametrize(("claim_id", "mutant"), MUTANTS)
def test_each_mutant_is_refuted_with_a_certificate(claim_id, mutant):
    planted = REGISTRY[claim_id].mutants[mutant]
    violated = [v for v in (planted.check(i, NUMPY) for i in planted.witnesses(16)) if v.status is Status.VIOLATED]
    assert violated, f"{planted.id} survived every witness"
    assert all(v.certified_by is not None and v.method != "float64 secular solve" for v in violated)


@pytest.mark.parametrize(
    ("claim_id", "factor"),
    [
        ("lower-bound", "2"),
        ("upper-bound", "1/2"),
        ("envelope", "1/2"),
        ("lower-bound-approached", "1/2"),
        ("psd", "1/2"),
    ],
)
def test_tightened_bounds_are_refuted_by_search(claim_id, factor):
    """Each bound multiplied by F (half an upper bound, twice a lower one) is refuted; for psd,
    (E_p u)² ≤ E_p[u²]/2 fails for a direction with a large mean."""
    result = search(REGISTRY[f"softmax-jacobian.{claim_id}"], NUMPY, tighten=Fraction(factor), budget=CI_SEARCH_BUDGET)
    found = result.counterexample
    assert found is not None and found.status is Status.VIOLATED and found.certified_by is not None


@pytest.mark.parametrize(
    ("instance", "method", "certified_by"),
    [
        (RunnerUp(V=5, m=0.7, tail_mass=0.0), "exact-rational", Certification.EXACT),
        (
            Logits(V=2, gap=700.0, offset=0.0, runners=1, tail_gap=0.0),
            "two-atom lemma (norm = 2m(1-m))",
            Certification.EXACT,
        ),
        (Dirichlet(V=600, concentration=0.5, seed=1), "interval-128", Certification.TWO_SIDED),
    ],
)
def test_norm_judgements_say_what_certifies_them(instance, method, certified_by):
    judgement = REGISTRY["softmax-jacobian.upper-bound"].judge_exactly(instance, Fraction(1))
    assert judgement.method.startswith(method) and judgement.certified_by is certified_by, judgement


class TestTorchCpuFastPath:
    """On PyTorch/CPU the array-API route (numba absent) keeps its per-row values on zero-copy NumPy
    views, runs at TORCH_CPU_THREADS intra-op threads (restored afterwards) and counts poles by
    floor(q); with numba the tensor's NumPy view goes through the compiled kernel."""

    @pytest.fixture
    def torch(self):
        return pytest.importorskip("torch")

    @staticmethod
    def rows(V: int = 2048) -> np.ndarray:
        """Rows below MOMENT_ROUTE_MIN_V: the bracketing solver (the moment route's own test is
        TestMomentRoute.test_torch_cpu_runs_the_route_on_its_numpy_view)."""
        runners = sj.construct_runner_up(V, 0.9, tail_mass=0.01)
        runners[1:4] = runners[1]  # three tied runner-ups: three poles at q = 1
        runners /= runners.sum()
        return np.stack([*dirichlet_rows(V, seeds=1), runners, sj.construct_tied_atoms(V, 0.25)])

    def test_matches_the_generic_path_bit_for_bit(self, torch, monkeypatch, array_route):
        rows = torch.asarray(self.rows())
        fast = sj.spectral_norm(rows)
        monkeypatch.setattr(sj, "_row_namespace", lambda xp, like: (xp, lambda t: t, lambda t: t))
        monkeypatch.setattr(sj, "_solver_context", lambda x: contextlib.nullcontext())
        generic = sj.spectral_norm(rows)
        assert isinstance(fast, torch.Tensor) and fast.dtype == generic.dtype
        np.testing.assert_array_equal(fast.numpy(), generic.numpy())

    def test_logit_rows_match_the_generic_path(self, torch, monkeypatch):
        z = np.stack([sj.construct_logits(1000, gap, runners=3) for gap in (5.0, 40.0, 600.0)])
        rows = sj.softmax_rows(torch.asarray(z))
        fast = sj.spectral_norm(rows)
        monkeypatch.setattr(sj, "_row_namespace", lambda xp, like: (xp, lambda t: t, lambda t: t))
        generic = sj.spectral_norm(rows).numpy()  # the generic path's float64 values, as the reference
        torch_cpu = resolve("torch", "cpu", "float64")
        assert_close(fast, generic, torch_cpu, what="spectral_norm(softmax_rows(z))", operations=4)

    def test_poles_by_floor_agree_with_a_certified_enclosure(self, torch, route):
        p = self.rows(300)[-2]  # three tied runner-ups
        for estimate in (float(sj.spectral_norm(torch.asarray(p))), float(sj.spectral_norm(p))):
            lo, hi = certified(p, estimate)
            assert max(estimate - lo, hi - estimate) <= SPECTRAL_NORM_ULPS * U64 * estimate

    def test_threads_are_one_inside_and_restored_after(self, torch, monkeypatch, array_route):
        seen = []
        solve = sj._solve
        monkeypatch.setattr(sj, "_solve", lambda *a, **k: (seen.append(torch.get_num_threads()), solve(*a, **k))[1])
        previous = torch.get_num_threads()
        torch.set_num_threads(2)
        try:
            sj.spectral_norm(torch.asarray(self.rows(64)))
            assert set(seen) == {min(2, sj.TORCH_CPU_THREADS)} and torch.get_num_threads() == 2
            with pytest.raises(sj.InputError):
                sj.spectral_norm(torch.full((2, 4), 0.5, dtype=torch.float64))
            assert torch.get_num_threads() == 2
        finally:
            torch.set_num_threads(previous)

    def test_an_input_that_requires_grad_is_accepted(self, torch, route):
        p = torch.asarray(self.rows(64)).requires_grad_(True)
        np.testing.assert_array_equal(sj.spectral_norm(p).numpy(), sj.spectral_norm(p.detach()).numpy())


class TestAWrongMeasurementIsCaughtByItsReference:
    """Issue 18 and 26: a quantity measured as the wrong thing, which every registry-wide test passes
    (the claim still holds on every witness), is caught by the reference: the dense J in Fractions or
    in mpmath at the row's dynamic range."""

    CLAIM = REGISTRY["softmax-jacobian.lower-bound"]
    SPECTRAL = sc.norm.measure_fn

    @classmethod
    def frobenius(cls, ctx):
        """‖J‖_F in place of ‖J‖₂: at least ‖J‖₂ >= m(1 − m), so the lower bound still "holds"."""
        measured = cls.SPECTRAL(ctx)
        J = to_numpy(sj.dense_jacobian(sc.built_in(ctx).rows))[0]
        return replace(measured, value=float(np.linalg.norm(J)))

    def test_the_frobenius_norm_passes_the_registry_but_not_the_reference(self, monkeypatch):
        from reference_check import disagreements

        cases = self.CLAIM.witnesses(16)
        assert not disagreements(self.CLAIM, cases, NUMPY)
        monkeypatch.setattr(sc.norm, "measure_fn", self.frobenius)
        assert all(self.CLAIM.check(c, NUMPY).status is Status.HOLDS for c in cases)
        found = disagreements(self.CLAIM, cases, NUMPY)
        # a two-atom row has rank-one J (‖J‖_F = ‖J‖₂) and a one-hot row J = 0: the others tell them apart
        assert len(found) >= 5, found

    def test_the_rank_of_the_underflowed_float_row_is_caught(self, monkeypatch):
        """Issue 26: the rank of the computed row, whose tail underflowed to zeros, reported for the exact
        softmax of the logits (positive everywhere): the reference's rank is V − 1."""
        from reference_check import quantity_disagreements

        case = Logits(V=3, gap=800.0)
        assert not quantity_disagreements(sc.rank, [case], NUMPY)
        monkeypatch.setattr(sc.rank, "measure_fn", lambda ctx: sc.rank_enclosure(sc.built_in(ctx), ctx.backend))
        found = quantity_disagreements(sc.rank, [case], NUMPY)
        assert found and "outside" in found[0], found


class TestASharpClaimAtTheSmallestTopRaisesNoFalseAlarm:
    """Issue 18: ‖J‖₂ = m(1 − m)·V/(V − 1) on a spread tail whose top atom is its largest (the top
    eigenvalue); the float 1/3 lies below 1/3, so SpreadTail(V=3, m=1/3) leaves that domain, and must be
    refused, never reported as a counterexample."""

    @staticmethod
    def sharp():
        from rankwall import declare

        return declare(
            "test.spread-tail-top-eigenvalue",
            statement="‖J‖₂ ≤ m(1 − m)·V/(V − 1) on spread tails",
            lhs=sc.norm,
            relation="<=",
            rhs=sc.top * sc.complement * sc.vocabulary / (sc.vocabulary - 1),
            cases=sc.spread_tails,
            register=False,
        )

    def test_the_float_third_is_outside_the_domain(self):
        from rankwall.checks.engine.verdict import OutsideDomain

        with pytest.raises(OutsideDomain, match="not the largest"):
            self.sharp().check(sc.SpreadTail(3, 1 / 3), NUMPY)

    def test_the_equality_is_decided_inside_the_domain(self):
        for case in (sc.SpreadTail(3, 0.5), sc.SpreadTail(64, 0.99), sc.SpreadTail(3, 1.0)):
            verdict = self.sharp().check(case, NUMPY)
            # the sign of the secular function at the bound: exact rationals, or balls of radius 0 here
            assert verdict.status is Status.HOLDS, verdict.to_json()
            assert verdict.certified_by in (Certification.EXACT, Certification.TWO_SIDED), verdict.to_json()

    def test_the_search_finds_no_counterexample_and_rejects_the_float_third(self):
        result = search(self.sharp(), NUMPY, budget=CI_SEARCH_BUDGET)
        assert result.counterexample is None, result.to_json()
        assert result.rejected > 0

    def test_the_same_claim_tightened_is_refuted(self):
        result = search(self.sharp(), NUMPY, tighten=Fraction(1) - Fraction(1, 10**6), budget=CI_SEARCH_BUDGET)
        found = result.counterexample
        assert found is not None and found.certified_by in (Certification.EXACT, Certification.TWO_SIDED)


@pytest.mark.parametrize(
    ("case", "classes"),
    [
        (RunnerUp(V=2, m=0.5), {"V = 2 or 3", "a tied top"}),
        (RunnerUp(V=1024, m=1.0), {"V >= 1024", "one-hot", "zero probabilities"}),
        (sc.SpreadTail(V=5, m=0.2), {"m = 1/V"}),
        (Sparse(V=9, support=3, seed=0), {"zero probabilities"}),
        (Logits(V=9, gap=745.0), {"a tail below the normal range"}),
        (Dirichlet(V=9, concentration=1.0, seed=0), set()),
    ],
)
def test_boundary_classes_name_the_edges_of_each_row(case, classes):
    assert {name for name, test in sc.ROW_BOUNDARY.items() if test(case)} == classes


@pytest.mark.parametrize("claim_id", ["trace", "rank", "upper-bound", "envelope"])
def test_the_witnesses_hold_at_the_edges_they_add(claim_id):
    """verify's witnesses include the one-hot rows and a tail below the normal range at every V."""
    claim = REGISTRY[f"softmax-jacobian.{claim_id}"]
    for case in claim.witnesses(64)[-3:]:
        assert sc.one_hot(case) or sc.tail_below_normal(case)
        assert claim.check(case, NUMPY).status is Status.HOLDS


def test_the_rank_certificate_says_how_near_an_entry_is_to_underflow():
    """rank is an integer identity: its certificate carries a continuous closeness for the search's
    target(), minus the smallest positive entry over m."""
    near = REGISTRY["softmax-jacobian.rank"].measure(Logits(V=9, gap=745.0), NUMPY, Fraction(1))
    far = REGISTRY["softmax-jacobian.rank"].measure(Uniform(V=9), NUMPY, Fraction(1))
    assert far.certificate["closeness"] == -1.0 and -1e-300 < near.certificate["closeness"] < 0


class TestDenseEigenvaluesOnTheSupport:
    """The dense cross-checks (rank's lower end, the trace's eigenvalue sum) see J's block on the
    support: its spectrum with V − |S| zeros is J's."""

    def test_the_block_with_the_zeros_is_the_spectrum_of_J(self):
        p = np.zeros(64)
        p[[3, 10, 11, 40, 63]] = [0.4, 0.3, 0.15, 0.1, 0.05]
        block = sc.support_eigenvalues(sj.probability_rows(p[None, :]))
        assert block.shape == (5,)
        full = np.linalg.eigvalsh(sj.dense_jacobian(p))
        np.testing.assert_allclose(np.sort(np.concatenate([block, np.zeros(59)])), full, atol=1e-16)

    @pytest.mark.parametrize("claim_id", ["softmax-jacobian.rank", "softmax-jacobian.trace"])
    def test_a_sparse_row_is_decided_in_torch_float32(self, claim_id):
        """torch's float32 eigh did not converge on the full 64 x 64 J of this row (59 zero eigenvalues)
        on an Intel Xeon, and the verdict was inconclusive; its 5 x 5 block converges."""
        pytest.importorskip("torch")
        verdict = REGISTRY[claim_id].check(Sparse(V=64, support=5, seed=0), resolve("torch", None, "float32"))
        assert verdict.status is Status.HOLDS, verdict.to_json()


def _dense_second_eigenvalue(raw: np.ndarray, logits: bool) -> tuple[mpmath.mpf, int]:
    """λ₂ of the dense J of the exact row (the float row read exactly and normalised, or the softmax of
    the logits) by mpmath's Jacobi eigensolver, at 256 bits beyond the row's dynamic range; and those bits."""
    span = float(raw.max() - raw.min()) / math.log(2) if logits else 0.0
    bits = 256 + 2 * math.ceil(span) + 64
    with mpmath.workprec(bits):
        if logits:
            z = [mpmath.mpf(float(x)) for x in raw]
            weights = [mpmath.exp(x - max(z)) for x in z]
        else:
            weights = [mpmath.mpf(float(x)) for x in raw]
        total = mpmath.fsum(weights)
        p = [w / total for w in weights]
        n = len(p)
        J = mpmath.matrix(n, n)
        for i in range(n):
            for j in range(n):
                J[i, j] = p[i] * mpmath.fsum(p[k] for k in range(n) if k != i) if i == j else -p[i] * p[j]
        return sorted(mpmath.eigsy(J, eigvals_only=True))[-2], bits


#: Rows of each shape of λ₂'s case analysis (the exact route's value, a value of p̂, 0, or a secular root).
SECOND_EIGENVALUE_SHAPES = {
    "c1 = 3 (uniform)": Uniform(3),
    "c1 = 5 (uniform)": Uniform(5),
    "c1 = 3 from logits": Logits(5, 0.0, runners=2, tail_gap=1.0),
    "c1 = 2, root": sc.TiedAtoms(5, 0.3),
    "c1 = 2, no other value": sc.TiedAtoms(3, 0.5),
    "tied runner-up": RunnerUp(5, 0.5, tail_mass=0.375),
    "tied runner-up from logits": Logits(5, 30.0, runners=2, tail_gap=3.0),
    "c1 = c2 = 1, root": RunnerUp(3, 0.6, tail_mass=0.1),
    "dirichlet": Dirichlet(12, 1.0, 3),
    "dirichlet, tiny entries": Dirichlet(10, 0.001, 5),
    "V = 2": RunnerUp(2, 0.75),
    "V = 2 uniform": Uniform(2),
    "one-hot": RunnerUp(3, 1.0),
    "one-hot sparse": Sparse(8, 1, 1),
    "underflowed tied runner-ups": Logits(4, 745.0, runners=3),
    "underflowed root": Logits(5, 745.0, runners=1, tail_gap=1.0),
    "underflowed root, far tail": Logits(6, 800.0, runners=1, tail_gap=20.0),
    "runner-up near one": RunnerUp(4, 1 - 1e-9, tail_mass=5e-10),
}


class TestSecondEigenvalue:
    """λ₂(J) (issue 28 item 3): the exact route against a dense eigensolver at 256 bits beyond the row's
    range, on each shape of the case analysis; its float measure within its bound; a wrong route caught by
    the reference; and declared statements about it decided."""

    @pytest.mark.parametrize("case", list(SECOND_EIGENVALUE_SHAPES.values()), ids=list(SECOND_EIGENVALUE_SHAPES))
    def test_the_exact_value_is_the_dense_one(self, case):
        ctx = Context(case, NUMPY)
        built = sc.built_in(ctx)
        expected, bits = _dense_second_eigenvalue(built.raw, built.form == "logits")
        with exact.precision(128):
            value = sc.second_eigenvalue.exact(ctx)
            with mpmath.workprec(bits):
                slack = mpmath.mpf(case.V) ** 2 * mpmath.mpf(2) ** (16 - bits)
                if value.rational:
                    q = Fraction(int(value.value.p), int(value.value.q))
                    assert abs(mpmath.mpf(q.numerator) / q.denominator - expected) <= slack, (q, expected)
                else:
                    ball = value.ball
                    assert ball.rad() <= abs(ball.mid()) * 2.0**-100, ball  # narrow: refined past the float
                    ends = (ball.lower(), ball.upper())
                    low, high = (mpmath.mpf(tuple(int(x) for x in e.mid().man_exp())) for e in ends)
                    assert low - slack <= expected <= high + slack, (ball, expected)
        measured = sc.second_eigenvalue.measure(ctx)
        if measured.bounded:
            with mpmath.workprec(bits):
                assert abs(mpmath.mpf(measured.value) - expected) <= mpmath.mpf(measured.error), (measured, expected)

    def test_structural_values_are_exact(self):
        for case, value in ((Uniform(3), Fraction(1, 3)), (RunnerUp(2, 0.75), 0), (RunnerUp(3, 1.0), 0)):
            with exact.precision(128):
                got = sc.second_eigenvalue.exact(Context(case, NUMPY))
            assert got.rational and Fraction(int(got.value.p), int(got.value.q)) == value

    def test_the_float_measure_is_bounded_at_large_V(self):
        case = Dirichlet(8192, 1.0, 7)
        ctx = Context(case, NUMPY)
        measured = sc.second_eigenvalue.measure(ctx)
        with exact.precision(128):
            value = sc.second_eigenvalue.exact(ctx)
        assert measured.bounded and measured.error < 1e-9
        assert abs(measured.value - float(value.ball.mid())) <= measured.error
        assert float(value.ball.rad()) <= float(value.ball.mid()) * 2.0**-100

    def test_a_wrong_route_is_caught_by_the_reference(self, monkeypatch):
        from reference_check import quantity_disagreements

        cases = [v for k, v in SECOND_EIGENVALUE_SHAPES.items() if "underflowed" not in k]
        assert not quantity_disagreements(sc.second_eigenvalue, list(SECOND_EIGENVALUE_SHAPES.values()), NUMPY)
        distinct = [c for c in cases if not isinstance(c, Uniform) and c.V > 2 and c != RunnerUp(3, 1.0)]
        monkeypatch.setattr(sc.second_eigenvalue, "exact_fn", sc.norm.exact_fn)
        found = quantity_disagreements(sc.second_eigenvalue, distinct, NUMPY)
        assert len(found) >= 5 and all("exact" in f for f in found), found
        monkeypatch.undo()
        monkeypatch.setattr(sc.second_eigenvalue, "measure_fn", sc.norm.measure_fn)
        found = quantity_disagreements(sc.second_eigenvalue, distinct, NUMPY)
        assert len(found) >= 5 and all("measured" in f for f in found), found

    def test_declared_statements_against_the_norm(self):
        import rankwall
        from rankwall.testing import assert_holds, assert_violated

        before = {c.id for c in REGISTRY}
        try:
            below = rankwall.declare(
                "t.second-below-norm",
                statement="λ₂(J) ≤ ‖J‖₂",
                lhs=sc.second_eigenvalue,
                relation="<=",
                rhs=sc.norm,
                cases=sc.rows,
            )
            assert_holds(below, V=(2, 3, 16), examples=3)
            above = rankwall.declare(
                "t.second-above-norm",
                statement="λ₂(J) ≥ ‖J‖₂",
                lhs=sc.second_eigenvalue,
                relation=">=",
                rhs=sc.norm,
                cases=sc.rows,
            )
            verdict = above.check(Dirichlet(9, 1.0, 0), NUMPY)
            assert verdict.status is Status.VIOLATED and verdict.certified_by is not None, verdict.to_json()
            counterexample = assert_violated(above, budget=50)
            assert counterexample.status is Status.VIOLATED
        finally:
            for claim in list(REGISTRY):
                if claim.id not in before:
                    REGISTRY.unregister(claim.id)
