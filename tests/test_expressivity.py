"""Tests of theory/expressivity.py: Gibbs, the circle witness, the D = 1 contrast."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from rankwall.checks import exact
from rankwall.checks.claims import expressivity as claims
from rankwall.checks.engine import tolerance
from rankwall.checks.engine.backends import float64_copy, resolve
from rankwall.checks.engine.quantities import Context, declare
from rankwall.checks.engine.verdict import REGISTRY, Certification, Status
from rankwall.testing import assert_close
from rankwall.theory import expressivity as ex
from rankwall.theory.validation import InputError


class TestGibbs:
    def test_gap_is_the_weighted_kl_and_vanishes_at_the_empirical_distribution(self):
        rng = np.random.default_rng(0)
        counts = rng.integers(0, 4, size=(20, 9)) + np.eye(20, 9, dtype=int)
        counts[counts.sum(1) == 0, 0] = 1
        N = counts / counts.sum(1, keepdims=True)
        f = counts.sum(1) / counts.sum()
        P = rng.dirichlet(np.ones(9), size=20)
        gap, kl = ex.kl_gap(P, N, f)
        assert gap == pytest.approx(kl, rel=1e-12) and gap > 0
        assert ex.kl_gap(N, N, f) == (0.0, 0.0)


FLOAT32_BACKENDS = [
    pytest.param(("array-api-strict", "no_float64", "float32"), id="strict-no_float64"),
    pytest.param(("torch", "cpu", "float32"), id="torch-cpu-float32"),
]


def float32_backend(spec):
    pytest.importorskip(spec[0].replace("-", "_"))
    return resolve(*spec)


class TestGibbsOnBackends:
    """``expressivity.gibbs`` follows ``--backend``: the instance rounded to the backend's dtype, the
    cross-entropies and kl_gap computed in its namespace, bounds at its u with an underflow term."""

    def test_log_softmax_stays_finite_where_the_plain_softmax_underflows(self):
        import array_api_strict as xp

        z64 = np.array([[0.0, -200.0, -1.0], [50.0, -150.0, 0.0]])
        strict = resolve("array-api-strict", "no_float64", "float32")
        z = strict.asarray(z64)  # every entry a float32
        stable = ex.log_softmax(z)
        with np.errstate(divide="ignore"):
            plain = np.log(float64_copy(xp.exp(z) / xp.sum(xp.exp(z), axis=1, keepdims=True)))
        assert np.isneginf(plain).any() and np.all(np.isfinite(float64_copy(stable)))
        exact = z64 - scipy_logsumexp(z64)
        # tolerance.log_softmax_error's entrywise bound, gamma_{V+4} (1 + |z_ij| + |max_j z_ij| + |L_ij|),
        # plus one rounding for the float64 reference's own (gamma_{V+4} at 2^-53 is below float32's u)
        scale = 1 + np.abs(z64) + np.abs(z64).max(axis=1, keepdims=True) + np.abs(exact)
        V = z64.shape[1]
        assert_close(stable, exact, strict, what="log_softmax(z)", operations=V + 5, magnitude=scale)

    @pytest.mark.parametrize("spec", FLOAT32_BACKENDS)
    def test_kl_gap_computes_in_the_arrays_namespace(self, spec):
        backend = float32_backend(spec)
        rng = np.random.default_rng(1)
        counts = rng.integers(0, 4, size=(6, 5)) + np.eye(6, 5, dtype=int)
        N = counts / counts.sum(1, keepdims=True)
        f = counts.sum(1) / counts.sum()
        P = rng.dirichlet(np.ones(5), size=6)
        gap, kl = ex.kl_gap(*(backend.asarray(x) for x in (P, N, f)))
        assert (gap, kl) == pytest.approx(ex.kl_gap(P, N, f), rel=1e-5)
        log_P = ex.log_softmax(backend.asarray(np.log(P)))
        assert ex.kl_gap(backend.asarray(P), backend.asarray(N), backend.asarray(f), log_P=log_P)[1] == pytest.approx(
            kl, rel=1e-5
        )

    @pytest.mark.parametrize("spec", FLOAT32_BACKENDS)
    @pytest.mark.parametrize("scale", [0.1, 10.0, 120.0])
    def test_float32_cross_entropies_lie_within_their_bounds(self, spec, scale):
        """Against float64 on the same rounded logits; at scale 120 probabilities fall below float32's
        smallest normal (the underflow term), and log P stays finite."""
        backend, numpy = float32_backend(spec), resolve("numpy")
        for seed in range(3):
            case = claims.GibbsCase(V=200, contexts=40, seed=seed, scale=scale)
            counts, z = claims.gibbs_instance(case)
            a = claims.gibbs_arrays(counts, z, False, backend)
            ce = claims.cross_entropies(a, False)
            rounded = z.astype(np.float32).astype(np.float64)
            ref = claims.cross_entropies(claims.gibbs_arrays(counts, rounded, False, numpy), False)
            for side in ("ce_N", "ce_P"):
                assert abs(ce[side] - ref[side]) <= ce[f"{side}_error"] + ref[f"{side}_error"], (seed, side)
            if scale == 120.0:
                P = np.exp(rounded - rounded.max(axis=1, keepdims=True))
                assert (P / P.sum(axis=1, keepdims=True) < tolerance.smallest_normal(np.float32)).any()

    @pytest.mark.parametrize("spec", FLOAT32_BACKENDS)
    def test_float32_verdicts_name_the_backend_and_agree_with_float64(self, spec):
        """A verdict the float32 measurement decides names the backend; one left to the exact route (the
        exact fit, where both sides are the same form) is exact, on the float32 instance."""
        backend, numpy = float32_backend(spec), resolve("numpy")
        gibbs = REGISTRY["expressivity.gibbs"]
        where = f"{backend.name} float32"
        for case in gibbs.witnesses(64):
            verdict = gibbs.check(case, backend)
            assert verdict.status is Status.HOLDS, verdict.to_json()
            assert where in verdict.method or verdict.certified_by is Certification.EXACT, verdict.to_json()
            for factor in (Fraction(1, 2), Fraction(2)):
                expected = gibbs.check(case, numpy, factor).status
                assert gibbs.check(case, backend, factor).status is expected, (case, factor)
        for name, mutant in gibbs.mutants.items():
            verdicts = [mutant.check(i, backend) for i in mutant.witnesses(64)]
            assert any(v.status is Status.VIOLATED for v in verdicts), name

    def test_a_count_float32_cannot_hold_is_left_to_the_exact_route(self, monkeypatch):
        """Counts past 2^24 are not exact in float32: the float route has no bound (an infinite error) and
        the exact route, on the same float32 instance, decides."""
        instance = claims.gibbs_instance
        monkeypatch.setattr(claims, "gibbs_instance", lambda case: (lambda c, z: (c * 2**20 + c, z))(*instance(case)))
        strict = resolve("array-api-strict", "no_float64", "float32")
        assert not claims.cross_entropy_model.measure(Context(SOFTMAX, strict)).bounded
        verdict = REGISTRY["expressivity.gibbs"].check(SOFTMAX, strict)
        assert verdict.status is Status.HOLDS and verdict.method.startswith("interval-"), verdict.to_json()
        assert REGISTRY["expressivity.gibbs"].check(SOFTMAX, resolve("numpy")).method.startswith("numpy float64")


def scipy_logsumexp(z):
    import scipy.special

    return scipy.special.logsumexp(z, axis=1, keepdims=True)


class TestCircleWitness:
    @pytest.mark.parametrize("V", [2, 3, 50, 4096])
    def test_argmax_and_probability(self, V):
        rng = np.random.default_rng(V)
        targets = rng.integers(0, V, 20)
        probs = rng.uniform(1 / V + 1e-3, 0.999, 20) if V > 2 else rng.uniform(0.51, 0.99, 20)
        H, W = ex.construct_top1_witness(targets, probs, 3, 1e-9, V)
        argmax, top, ties = ex.top1(H, W)
        assert (argmax == targets).all() and (ties == 1).all()
        np.testing.assert_allclose(top, probs, atol=1e-9)
        assert np.all(W[:, 2] == 0)  # extra dimensions unused

    def test_top1_rises_from_uniform_to_one(self):
        values = ex.circle_top1([0.0, 1.0, 10.0, 1e6], 100)
        assert values[0] == pytest.approx(0.01) and np.all(np.diff(values) > 0) and values[-1] > 0.99

    def test_float32_loses_the_argmax_at_large_V(self):
        """The precision frontier: neighbouring logits differ by r(1 - cos 2pi/V) ~ r 2pi^2/V^2."""
        V = 131072
        targets = np.arange(0, V, V // 32)
        H, W = ex.construct_top1_witness(targets, np.full(len(targets), 0.5), 2, 1e-9, V)
        assert (ex.top1(H, W)[0] == targets).all()
        z = H.astype(np.float32) @ W.astype(np.float32).T
        assert (z.argmax(axis=1) != targets).any()


class TestDimensionOne:
    def test_without_bias_only_the_extremes_can_win(self):
        w = np.array([0.3, -1.0, 2.0, 0.5])
        assert ex.interior_tokens(w).tolist() == [0, 3]
        for h in (-3.0, -0.1, 0.1, 3.0):
            assert np.argmax(h * w) in (1, 2)

    def test_with_a_bias_every_token_wins(self):
        W, b = ex.tangent_head(50, 0)
        argmax, _, ties = ex.top1(W, W, b)
        assert (argmax == np.arange(50)).all() and (ties == 1).all()


def d1_heads(seeds: range = range(6)):
    """D = 1 heads of every kind Theorem EX.3 (4) covers: no bias, the tangent head, random biases,
    and weights with ties (two values only, and a repeated extreme), at V = 3 to 8."""
    for seed in seeds:
        rng = np.random.default_rng(seed)
        V = 3 + seed % 6
        w = rng.uniform(-2, 2, V)
        yield "no bias", w, None
        yield "tangent", *ex.tangent_head(V, seed)
        yield "random bias", w, rng.uniform(-3, 3, V)
        yield "two weights", rng.choice([-1.0, 1.0], V), rng.uniform(-1, 1, V)
        yield "a repeated extreme", np.r_[w, w.max()], rng.uniform(-1, 1, V + 1)


def grid_top1(w, b, t, lo, hi, points=20001):
    """p_t(h) on a grid strictly inside the finite interval (lo, hi), where t is the strict argmax."""
    h = np.linspace(float(lo), float(hi), points)[1:-1]
    z = np.outer(h, w) + (0 if b is None else b)
    assert (z.argmax(axis=1) == t).all()
    return np.exp(z[:, t] - z.max(axis=1)) / np.exp(z - z.max(axis=1, keepdims=True)).sum(axis=1)


class TestDimensionOneTopOneRange:
    """Theorem EX.3 (1) and (4): the top-1 probabilities a token of a D = 1 head reaches as the strict
    argmax, from d1_top1_range (log-concavity), against a dense grid and closed forms."""

    def test_two_tokens_reach_every_value_above_one_half_without_a_bias(self):
        """(1): w = (1, -1), h = r > 0: token 0 wins with top-1 probability 1/(1 + e^{-2r})."""
        w = np.array([1.0, -1.0])
        assert ex.d1_argmax_interval(w, None, 0) == (0, None) and ex.d1_argmax_interval(w, None, 1) == (None, 0)
        assert ex.d1_top1_range(w, None, 0) == (0.5, 1.0) == ex.d1_top1_range(w, None, 1)
        p = np.array([0.5001, 0.6, 0.9, 0.999999])
        r = np.log(p / (1 - p)) / 2
        argmax, top, ties = ex.top1(r[:, None], w[:, None])
        assert (argmax == 0).all() and (ties == 1).all()
        assert np.abs(top - p).max() <= 8 * tolerance.gamma(4, 2.0**-53)

    def test_the_range_matches_a_dense_grid_on_bounded_intervals(self):
        """Grid values are attained, so they lie in [inf, sup] up to the rounding of p (gamma_V); and
        |dp_t/dh| <= L = max|w_x - w_t|, so the grid's extremes come within L times the step of the range."""
        checked = 0
        for _, w, b in d1_heads():
            w = np.asarray(w, dtype=float).ravel()
            for t in range(len(w)):
                interval = ex.d1_argmax_interval(w, b, t)
                if interval is None or None in interval:
                    continue
                lo, hi = interval
                inf, sup = ex.d1_top1_range(w, b, t)
                grid = grid_top1(w, b, t, lo, hi)
                rounding = 4 * tolerance.gamma(len(w) + 4, 2.0**-53)
                step = float(hi - lo) / 20000 * np.abs(w - w[t]).max()
                assert inf * (1 - rounding) <= grid.min() <= inf + step + rounding, (w, b, t)
                assert sup - step - rounding <= grid.max() <= sup * (1 + rounding), (w, b, t)
                checked += 1
        assert checked >= 20

    def test_only_a_token_of_an_extreme_weight_reaches_both(self):
        """(4): 3/4 and 1/V + 1/(4V^2) are reached by at most the tokens of the largest and the smallest
        weight, so by at most two of V >= 3; without a bias (distinct weights) both extremes do."""
        for kind, w, b in d1_heads(range(12)):
            w = np.asarray(w, dtype=float).ravel()
            reaching = ex.d1_tokens_reaching(w, b, float(ex.EX3_HIGH), float(ex.ex3_low(len(w))))
            assert len(reaching) <= 2, (kind, w, b)
            assert set(w[reaching]) <= {w.min(), w.max()}, (kind, w, b)
            if kind == "no bias":
                assert reaching.tolist() == sorted([int(np.argmin(w)), int(np.argmax(w))]), w

    def test_a_middle_token_reaches_both_when_the_low_end_is_relaxed(self):
        """The low end matters: with a large bias the middle token of (-10, 0, 10) reaches 3/4 and comes
        down to just below 1/2 (at a tie with a neighbour, e^5 / (2e^5 + e^-5)), but never to 1/3 + 1/36."""
        w, b = np.array([-10.0, 0.0, 10.0]), np.array([0.0, 5.0, 0.0])
        inf, sup = ex.d1_top1_range(w, b, 1)
        assert sup > 0.98 and abs(inf - np.exp(5) / (2 * np.exp(5) + np.exp(-5))) <= 8 * tolerance.gamma(8, 2.0**-53)
        assert 1 in ex.d1_tokens_reaching(w, b, 0.75, 0.6)
        assert 1 not in ex.d1_tokens_reaching(w, b, 0.75, float(ex.ex3_low(3)))

    def test_a_token_that_never_wins_has_no_range(self):
        w, b = np.array([0.0, 1.0, 1.0]), np.array([0.0, 2.0, 2.0])  # tokens 1 and 2 tie for every h
        assert ex.d1_argmax_interval(w, b, 1) is None and ex.d1_top1_range(w, b, 2) is None
        assert ex.d1_argmax_interval(w, b, 0) == (None, Fraction(-2))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: ex.construct_top1_witness([0, 5], [0.5, 0.5], 2, 1e-6, 5),
            "targets: token ids must be integers in [0, 5)",
        ),
        (lambda: ex.construct_top1_witness([0, 1], [0.5, 0.1], 2, 1e-6, 5), "probs: 0.1 is outside (1/V, 1)"),
        (lambda: ex.construct_top1_witness([0], [1.0], 2, 1e-6, 5), "probs: 1.0 is outside"),
        (lambda: ex.construct_top1_witness([0], [0.5], 1, 1e-6, 5), "D: 1 is out of range"),
        (lambda: ex.construct_top1_witness([0], [0.5], 2, 0.0, 5), "eps: 0.0 is outside"),
        (lambda: ex.construct_top1_witness([0], [np.nan], 2, 1e-6, 5), "probs: nan is outside"),
        (lambda: ex.construct_top1_witness([0.5], [0.5], 2, 1e-6, 5), "targets: token ids must be integers"),
        (lambda: ex.kl_gap(np.ones((2, 2)), np.ones((2, 3)), np.ones(2)), "do not fit together"),
        (
            lambda: ex.kl_gap(np.array([[0.0, 1.0]]), np.array([[0.5, 0.5]]), np.ones(1)),
            "zero probability on an observed",
        ),
    ],
)
def test_bad_input_is_refused_with_a_named_argument(call, message):
    with pytest.raises(InputError) as error:
        call()
    assert message in str(error.value)


ALL_CERTIFICATES = {*(f"certificate h = {s:g} w_i" for s in ex.CHEAP_SCALES), "certificate whitened"}


def wins_in_fractions(W, b, h, token):
    """(w_i - w_j) h + (b_i - b_j) > 0 for every j != i, in Fractions (every float is exact there)."""
    h = [Fraction(x) for x in h]
    logits = [
        sum((Fraction(w) * x for w, x in zip(row, h, strict=True)), Fraction(bj)) for row, bj in zip(W, b, strict=True)
    ]
    return all(logits[token] > z for j, z in enumerate(logits) if j != token)


def combination_in_fractions(W, b, token, support, weights):
    """weights >= 0 summing to 1 over rows other than the token, with sum_j weight_j w_j = w_i and
    sum_j weight_j b_j >= b_i, in Fractions."""
    if token in support or any(w < 0 for w in weights) or sum(weights) != 1:
        return False
    mixed = [sum(w * Fraction(W[j][d]) for w, j in zip(weights, support, strict=True)) for d in range(len(W[0]))]
    bias = sum(w * Fraction(b[j]) for w, j in zip(weights, support, strict=True))
    return mixed == [Fraction(x) for x in W[token]] and bias >= Fraction(b[token])


def assert_every_answer_is_certified(W, b, result):
    """Each argmaxable token's witness h and each never token's weights, re-checked in Fractions."""
    b = np.zeros(len(W)) if b is None else b
    W_list, b_list = W.tolist(), b.tolist()
    assert not (result["argmaxable"] & result["never"]).any()
    for token in np.flatnonzero(result["argmaxable"]):
        assert wins_in_fractions(W_list, b_list, result["witness"][token].tolist(), token), token
    assert sorted(result["combination"]) == np.flatnonzero(result["never"]).tolist()
    for token, (support, weights) in result["combination"].items():
        assert len(support) <= W.shape[1] + 1  # Carathéodory
        assert combination_in_fractions(W_list, b_list, token, support.tolist(), weights), token


class TestArgmaxableTokens:
    @pytest.mark.parametrize("D", [2, 3, 4])
    def test_lp_pipeline_agrees_with_the_convex_hull(self, D):
        from scipy.spatial import ConvexHull

        W = np.random.default_rng(D).standard_normal((150, D))
        result = ex.argmaxable(W)
        vertices = np.zeros(150, dtype=bool)
        vertices[ConvexHull(W).vertices] = True
        assert (result["argmaxable"] == vertices).all() and (result["never"] == ~vertices).all()

    def test_interior_rows_never_win_and_every_answer_is_rechecked(self):
        W = np.vstack([ex.circle_head(12), [[0.1, 0.0]]])
        result = ex.argmaxable(W)
        assert result["argmaxable"].tolist() == [True] * 12 + [False]
        assert result["method"][12] == "convex combination"
        winners = {*ALL_CERTIFICATES, ex.HULL_VERTEX, "reflections", "LP, re-checked"}
        assert {str(m) for m in result["method"][:12]} <= winners
        assert_every_answer_is_certified(W, None, result)

    def test_duplicate_rows_lose_to_their_twin_unless_their_bias_is_larger(self):
        W = np.vstack([ex.circle_head(6), ex.circle_head(6)[:2]])
        b = np.array([0.0, 0.5, 0, 0, 0, 0, 0.0, 0.0])
        result = ex.argmaxable(W, b)
        # rows 0 and 6 tie exactly (both lose); row 1 outbids its twin 7 and still wins.
        assert np.flatnonzero(~result["argmaxable"]).tolist() == [0, 6, 7]
        assert np.flatnonzero(result["never"]).tolist() == [0, 6, 7]
        assert result["method"][[0, 6, 7]].tolist() == ["duplicate row"] * 3
        assert {t: c[0].tolist() for t, c in result["combination"].items()} == {0: [6], 6: [0], 7: [1]}
        assert_every_answer_is_certified(W, b, result)

    @pytest.mark.parametrize("D", [8, 16])
    def test_cutting_plane_lp_agrees_with_the_full_lp(self, D):
        """Points drawn inside a ball with a few on its surface: most need the LP. Where the cutting
        planes certify a winning h, the LP over all tokens has a positive margin; where they do not,
        the full LP's own answer does not win either, and convex weights certify that none does."""
        rng = np.random.default_rng(D)
        W = rng.standard_normal((300, D)) * 0.3
        W[:20] /= np.linalg.norm(W[:20], axis=1, keepdims=True)
        head = ex.Head.of(W)
        starts = ex.whitened_directions(head.W, np.arange(300))
        for token in range(0, 300, 15):
            full, h_full = ex.argmax_lp(head, token)
            _, h, competitors = ex.cutting_plane_lp(head, token, starts[token])
            if h is not None:
                assert full > 0 and ex.strict_winner(head, h, token)
            else:
                assert not ex.strict_winner(head, h_full, token)
                assert ex.never_certificate(head, token, competitors) is not None

    def test_a_bias_can_make_interior_rows_argmaxable(self):
        W, b = ex.tangent_head(10, 1)
        assert ex.argmaxable(W, b)["argmaxable"].all()
        assert ex.argmaxable(W)["argmaxable"].sum() == 2

    def test_tokens_that_win_only_at_infinity(self):
        """w_2 = w_0 + w_1 halves: with a huge bias gap, only the direction matters."""
        W = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
        b = np.array([0.0, 0.0, -1e6])
        result = ex.argmaxable(W, b)
        assert result["argmaxable"].all()
        assert_every_answer_is_certified(W, b, result)

    @pytest.mark.parametrize(
        ("W", "bias", "message"),
        [
            (np.ones(3), None, "W: expected a (V x D) head"),
            (np.full((3, 2), np.nan), None, "W: non-finite value"),
            (np.ones((3, 2)), np.ones(2), "bias: shape (2,) does not match"),
            (np.ones((3, 2)), np.array([0.0, np.inf, 0.0]), "bias: non-finite value"),
            # issue 19: a cast would drop the imaginary part (with a NumPy warning) and answer
            (np.ones((3, 2)) * (1 + 1j), None, "W: expected a real dtype"),
            (np.ones((3, 2)), np.array([1j, 0, 0]), "bias: expected a real dtype"),
            # issue 19: strings raised a bare ValueError from inside NumPy
            ([["1", "0"], ["0", "1"], ["1", "1"]], None, "W: string '1' at index (0, 0)"),
            (np.ones((3, 2)), ["0", "1", "2"], "bias: string '0' at index (0,)"),
            # issue 19: booleans are refused here as load_head refuses them in files
            (np.eye(3, 2, dtype=bool), None, "W: boolean entries"),
            (np.ones((3, 2)), np.array([True, False, True]), "bias: boolean entries"),
        ],
    )
    def test_bad_heads_are_refused(self, W, bias, message):
        with pytest.raises(InputError) as error:
            ex.argmaxable(W, bias)
        assert message in str(error.value)

    def test_a_boolean_head_is_refused_from_memory_and_from_disk(self, tmp_path, capsys):
        """Issue 19: the same boolean head is refused by the library and by ``rankwall argmax --head``,
        rather than cast to 0/1 in one place and refused in the other."""
        from rankwall.checks.cli import EXIT_USAGE, main

        W = np.array([[True, False], [False, True], [False, False], [True, True]])
        np.save(tmp_path / "bool.npy", W)
        assert main(["argmax", "--head", str(tmp_path / "bool.npy")]) == EXIT_USAGE
        assert "holds booleans" in capsys.readouterr().err
        with pytest.raises(InputError, match="boolean entries"):
            ex.argmaxable(W)

    @pytest.mark.parametrize("tokens", [[0, 3], [-1], [[0, 1]], [0.5]])
    def test_bad_token_ids_are_refused(self, tokens):
        with pytest.raises(InputError, match="tokens: expected a 1-D array of token ids in"):
            ex.argmaxable(ex.circle_head(3), tokens=np.array(tokens))

    def test_restricting_to_some_tokens_decides_only_those(self):
        W = np.vstack([ex.circle_head(8), [[0.0, 0.0]]])
        result = ex.argmaxable(W, tokens=[1, 8])
        assert result["argmaxable"].tolist() == [False, True] + [False] * 7
        assert result["method"][8] == "convex combination" and result["method"][0] == ""
        assert sorted(result["combination"]) == [8]


def random_head(seed, V, D, bias):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((V, D)), rng.standard_normal(V) if bias else None


#: Larger heads for the invariance tests, under --runslow (10-25 s each in the default run).
LARGE_INVARIANCE_HEADS = [
    pytest.param(*case, marks=pytest.mark.slow)
    for case in [(200, 4, False), (120, 5, True), (200, 4, True), (120, 5, False)]
]


class TestCertifiedArgmax:
    """Both answers carry certificates that hold in exact arithmetic, so neither depends on the scale
    or the offset of the head (issue 11, item 4)."""

    def test_a_small_head_keeps_its_vertices(self):
        """Scaling by 1e-6 once turned token 78, a vertex of the hull, into 'never' (an absolute LP
        margin floor); the certified answer is the same at both scales."""
        W = np.random.default_rng(101).standard_normal((150, 3))
        large, small = ex.argmaxable(W), ex.argmaxable(W * 1e-6)
        assert large["argmaxable"][78] and small["argmaxable"][78]
        assert (large["never"] == small["never"]).all() and large["never"].sum() == 120
        assert (large["argmaxable"] | large["never"]).all()
        assert_every_answer_is_certified(W * 1e-6, None, small)

    def test_a_vertex_by_1e_10_is_argmaxable(self):
        """Row 4 sticks out of the square by 1e-10: h = (1, 0) makes it win; row 5 is inside."""
        W = np.array([[1, 6], [1, 4], [-1, 6], [-1, 4], [1 + 1e-10, 5], [0.3, 4.8]])
        result = ex.argmaxable(W)
        assert result["argmaxable"].tolist() == [True] * 5 + [False]
        assert result["never"].tolist() == [False] * 5 + [True]
        assert wins_in_fractions(W.tolist(), [0.0] * 6, result["witness"][4].tolist(), 4)
        assert_every_answer_is_certified(W, None, result)

    def test_a_margin_below_rounding_is_decided_exactly(self):
        """The float logits of rows 0 and 1 at h = (1, 1) are both 1; exactly, row 0 is 2^-60 ahead."""
        head = ex.Head.of(np.array([[1.0, 2.0**-60], [1.0, 0.0], [-1.0, 0.0]]))
        h = np.array([1.0, 1.0])
        assert (head.W @ h)[0] == (head.W @ h)[1]
        assert ex.strict_winner(head, h, 0) and not ex.strict_winner(head, h, 1)

    @pytest.mark.parametrize(("V", "D", "bias"), [(40, 2, False), (40, 3, True), *LARGE_INVARIANCE_HEADS[:2]])
    def test_scaling_the_head_changes_nothing(self, V, D, bias):
        W, b = random_head(V + D, V, D, bias)
        base = ex.argmaxable(W, b)
        assert (base["argmaxable"] | base["never"]).all()
        for c in (1e-6, 1e6, 2.0**-70, 1e-150, 1e150):
            scaled = ex.argmaxable(W * c, None if b is None else b * c)
            assert (scaled["argmaxable"] == base["argmaxable"]).all(), c
            assert (scaled["never"] == base["never"]).all(), c

    @pytest.mark.parametrize(("V", "D", "bias"), [(40, 2, True), (40, 3, False), *LARGE_INVARIANCE_HEADS[2:]])
    def test_shifting_the_head_changes_nothing(self, V, D, bias):
        """Rows on a 2^-20 grid and integer shifts: W + 1 t^T and b + s are exact in floats, so the
        two heads have exactly the same argmax for every h."""
        W, b = random_head(V * D, V, D, bias)
        W = np.round(W * 2**20) / 2**20
        base = ex.argmaxable(W, b)
        assert (base["argmaxable"] | base["never"]).all()
        for scale in (1.0, 4096.0, 2.0**30):  # at 2^30 the rounding bound sends more rivals to exact checks
            t = np.round(np.random.default_rng(D).standard_normal(D) * scale)
            shifted = W + t
            assert ((shifted - t) == W).all()
            moved = ex.argmaxable(shifted, None if b is None else b + scale)
            assert (moved["argmaxable"] == base["argmaxable"]).all(), scale
            assert (moved["never"] == base["never"]).all(), scale

    @pytest.mark.parametrize(
        ("V", "D", "bias"), [(60, 3, False), (60, 3, True), pytest.param(300, 8, True, marks=pytest.mark.slow)]
    )
    def test_every_answer_carries_a_certificate(self, V, D, bias):
        W, b = random_head(7 * D, V, D, bias)
        result = ex.argmaxable(W, b)
        assert result["never"].any() and result["argmaxable"].any()
        assert_every_answer_is_certified(W, b, result)

    @pytest.mark.parametrize(
        ("W", "bias", "never"),
        [
            (np.vstack([ex.circle_head(8), [[0.0, 0.0]]]), None, [8]),  # cos/sin rounding: inside by far
            (np.array([[1.0, 0], [-1, 0], [0, 0], [0, 1], [0, -1]]), None, [2]),  # an exact midpoint
            (np.array([[0.0], [1.0], [2.0]]), np.array([0.0, 1.0, 2.0]), [1]),  # ties the line, never above
            (np.array([[0.0], [1.0], [2.0]]), np.array([0.0, 1.0 + 2**-40, 2.0]), []),  # above: wins at h = -1
            (np.zeros((3, 2)), np.array([1.0, 2.0, 2.0]), [0, 1, 2]),  # equal rows; the top bias is shared
        ],
    )
    def test_degenerate_heads(self, W, bias, never):
        result = ex.argmaxable(W, bias)
        assert np.flatnonzero(result["never"]).tolist() == never
        assert (result["argmaxable"] | result["never"]).all()
        assert_every_answer_is_certified(W, bias, result)


class TestTheHullRoute:
    """At D <= HULL_MAX_D qhull proposes the candidates; every answer is still certified exactly, so
    the route gives the hull's vertices without a bias and the general route's answers with one, and a
    hull that proposes nonsense only sends tokens on to the general route (issue 29, item 3)."""

    @staticmethod
    def vertices(points):
        from scipy.spatial import ConvexHull

        found = np.zeros(len(points), dtype=bool)
        found[ConvexHull(points).vertices] = True
        return found

    @pytest.mark.parametrize("D", [2, 3, 4])
    def test_the_hull_settles_every_token_without_a_bias(self, D):
        W = random_head(11 * D, 80, D, False)[0]
        result = ex.argmaxable(W)
        assert (result["argmaxable"] == self.vertices(W)).all() and (result["never"] == ~self.vertices(W)).all()
        assert set(result["method"].tolist()) == {ex.HULL_VERTEX, ex.CONVEX_COMBINATION}
        assert_every_answer_is_certified(W, None, result)

    def test_with_a_bias_it_answers_as_the_general_route(self, monkeypatch):
        W, b = random_head(34, 30, 3, True)
        result = ex.argmaxable(W, b)
        monkeypatch.setattr(ex, "HULL_MAX_D", 0)
        general = ex.argmaxable(W, b)
        assert (result["argmaxable"] == general["argmaxable"]).all() and (result["never"] == general["never"]).all()
        assert ex.CONVEX_COMBINATION in result["method"]
        assert_every_answer_is_certified(W, b, result)

    @pytest.mark.parametrize(
        ("W", "winners"),
        [
            # a grid: edge midpoints coplanar with a facet, the centre inside
            (np.array([[x, y] for x in (0.0, 0.5, 1.0) for y in (0.0, 0.5, 1.0)]), [0, 2, 6, 8]),
            # collinear rows: only the two ends win
            (np.outer(np.linspace(-1, 1, 9), [1.0, 2.0, -1.0]), [0, 8]),
            # twins of rows 0-2 tie with them (all never), row 13 lies inside
            (np.vstack([ex.circle_head(10), ex.circle_head(10)[:3], [[0.2, 0.1]]]), [3, 4, 5, 6, 7, 8, 9]),
        ],
        ids=["grid", "collinear", "twins"],
    )
    def test_degenerate_heads_are_answered_and_certified(self, W, winners):
        result = ex.argmaxable(W)
        assert np.flatnonzero(result["argmaxable"]).tolist() == winners
        assert (result["argmaxable"] | result["never"]).all()
        assert_every_answer_is_certified(W, None, result)

    def test_rows_in_a_plane_of_a_larger_space(self):
        """The hull is taken in the rows' affine hull (a plane of R^3), the weights checked in all
        three coordinates."""
        plane = random_head(3, 40, 2, False)[0]
        result = ex.argmaxable(np.hstack([plane, np.zeros((40, 1))]))
        assert (result["argmaxable"] == self.vertices(plane)).all()
        assert set(result["method"].tolist()) == {ex.HULL_VERTEX, ex.CONVEX_COMBINATION}
        assert_every_answer_is_certified(np.hstack([plane, np.zeros((40, 1))]), None, result)

    def test_a_lying_hull_changes_no_answer(self, monkeypatch):
        """Every vertex proposed inside (on a support of other rows) and every other row proposed as a
        vertex with h = 0: no proposal survives its exact check, and the general route answers."""
        W = random_head(5, 24, 2, False)[0]
        honest = ex._hull_proposals

        def lying(head, open_tokens):
            real = honest(head, open_tokens)
            inside = np.array(sorted(t for ts in real.supports.values() for t in ts))
            supports = {tuple(t for t in real.tokens[:3]): [int(t) for t in real.tokens[3:]]}
            return ex._HullProposals(tokens=inside, H=np.zeros((len(inside), 2)), supports=supports)

        monkeypatch.setattr(ex, "_hull_proposals", lying)
        result = ex.argmaxable(W)
        assert (result["argmaxable"] == self.vertices(W)).all() and (result["never"] == ~self.vertices(W)).all()
        assert ex.HULL_VERTEX not in result["method"]
        assert_every_answer_is_certified(W, None, result)

    def test_weights_off_the_support_are_refused(self):
        """A token proposed on a simplex that does not hold it gets no certificate (a negative weight),
        and a support whose rows are not independent none either (a zero determinant)."""
        W = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.25, 0.25], [2.0, 2.0], [0.5, 0.0]])
        found = ex._hull_never(ex.Head.of(W), {(0, 1, 2): [3, 4], (0, 1, 5): [3]})
        assert sorted(found) == [3]
        support, weights = found[3]
        assert sorted(support.tolist()) == [0, 1, 2] and sum(weights) == 1 and all(w > 0 for w in weights)


def test_rankwall_argmax(capsys, tmp_path):
    import json

    from rankwall.checks.cli import EXIT_OK, EXIT_USAGE, main

    W = np.vstack([ex.circle_head(8), [[0.0, 0.0]]])
    np.save(tmp_path / "head.npy", W)
    assert main(["argmax", "--head", str(tmp_path / "head.npy"), "--json"]) == EXIT_OK
    record = json.loads(capsys.readouterr().out)
    assert record["unargmaxable"] == [8] and record["undecided"] == [] and record["V"] == 9
    np.savez(tmp_path / "wrong.npz", X=W)
    assert main(["argmax", "--head", str(tmp_path / "wrong.npz")]) == EXIT_USAGE
    assert "expected an array named W" in capsys.readouterr().err
    (tmp_path / "text.npy").write_text("not numpy")
    assert main(["argmax", "--head", str(tmp_path / "text.npy")]) == EXIT_USAGE


class TestPrecisionFrontier:
    @pytest.mark.parametrize("D", [2, 3, 5])
    def test_sphere_codes_are_unit_vectors_and_distinct(self, D):
        W = ex.sphere_code(500, D, seed=1)
        np.testing.assert_allclose(np.linalg.norm(W, axis=1), 1.0, rtol=1e-12)
        gram = W @ W.T
        np.fill_diagonal(gram, -1)
        assert gram.max() < 1 - 1e-6

    def test_fibonacci_spreads_better_than_the_circle(self):
        def nearest(W):
            gram = W @ W.T
            np.fill_diagonal(gram, -1)
            return 1 - gram.max()

        assert nearest(ex.sphere_code(2000, 3)) > 100 * nearest(ex.sphere_code(2000, 2))

    def test_code_witness_reaches_the_probability(self):
        W = ex.sphere_code(300, 3)
        targets = np.arange(0, 300, 30)
        H = ex.code_witness(W, targets, 0.7)
        argmax, top, _ = ex.top1(H, W)
        assert (argmax == targets).all()
        np.testing.assert_allclose(top, 0.7, atol=1e-9)

    def test_smallest_dimension_grows_as_precision_falls(self):
        import torch

        assert ex.smallest_surviving_dimension(1024, torch.float64) == 2
        assert ex.smallest_surviving_dimension(1024, torch.bfloat16) > ex.smallest_surviving_dimension(
            1024, torch.float32
        )


# --------------------------------------------------------------------------- the claims can fail (issue 11)

TANGENT = claims.TangentCase(V=50, seed=0)
TOP1 = claims.Top1Case(V=16, D=2, contexts=4, seed=0, eps=1e-6)
FIT = claims.GibbsCase(V=40, contexts=12, seed=0, scale=1.0, exact_fit=True)
SOFTMAX = replace(FIT, exact_fit=False)
HEAD = claims.ArgmaxHeadCase(V=40, D=2, seed=0, interior=2)


def check(claim_id, case, factor=Fraction(1)):
    return REGISTRY[claim_id].check(case, resolve("numpy"), factor)


def count_of(quantity, case):
    """The exact interval of an integer quantity on a case (NumPy float64)."""
    with exact.precision(128):
        return quantity.exact(Context(case, resolve("numpy")))


class TestD1BiasArgmaxCanFail:
    """The judge used to answer 'holds' whenever there was a bias, whatever the head: now every token
    is certified at h = w_t on the exact tangent head, and a miss is confirmed in exact integers."""

    CLAIM = "expressivity.d1-bias-argmax"

    def test_the_tangent_head_holds_with_every_token_certified(self):
        verdict = check(self.CLAIM, TANGENT)
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.TWO_SIDED
        assert verdict.certificate["missed"] == 0

    def test_a_screen_that_drops_the_bias_is_not_believed(self, monkeypatch):
        """The screen planted with the slopes' answer (the bias dropped: only the extreme weights win): its
        losses are confirmed exactly on the exact tangent head, which clears them, so the routes
        disagree and nothing is decided."""

        def without_the_bias(W):
            won = np.zeros(len(W), dtype=bool)
            won[[int(np.argmin(W)), int(np.argmax(W))]] = True
            return won, ~won

        monkeypatch.setattr(claims, "tangent_screen", without_the_bias)
        verdict = check(self.CLAIM, TANGENT)
        assert verdict.status is Status.INCONCLUSIVE and "disagree" in verdict.method, verdict.to_json()
        assert verdict.certificate["cleared"] and not verdict.certificate["confirmed"]

    def test_biases_built_wrong_are_the_head_as_built_not_the_tangent_head(self, monkeypatch):
        """b = +w²/2 from the constructor: the claim is of the exact tangent head (its biases −w_v²/2 from the
        slopes) and still holds; the head as built loses, confirmed in exact integers."""
        tangent = ex.tangent_head
        monkeypatch.setattr(ex, "tangent_head", lambda V, seed: (tangent(V, seed)[0], -tangent(V, seed)[1]))
        assert check(self.CLAIM, TANGENT).status is Status.HOLDS
        built = count_of(claims.built_head_losses, TANGENT)
        assert built.pinned and built.lo >= 1 and built.certificate["confirmed"], built

    def test_a_loss_caused_by_rounded_biases_is_a_float_finding(self):
        """Weights 2.9e-10 apart (below 2^-26): the float64 biases -w²/2, each rounded, lose token 533
        exactly, while the exact tangent head makes it win. The claim (of the exact tangent head) holds,
        decided in integers where the screen is open; the head as built shows the finding."""
        W, _ = ex.tangent_head(564, 64056)
        assert np.diff(W[:, 0])[532:534].min() < 2.0**-26
        close = claims.TangentCase(V=564, seed=64056)
        verdict = check(self.CLAIM, close)
        assert verdict.status is Status.HOLDS and 533 in verdict.certificate["decided_in_integers"]
        built = count_of(claims.built_head_losses, close)
        assert (built.lo, built.hi) == (1, 1) and built.certificate["confirmed"] == [533]

    def test_a_winners_screen_that_misses_every_token_is_not_believed(self, monkeypatch):
        """Head.winners planted wrong (every token lost): the exact comparison clears the losses it checks,
        and two certified routes that disagree leave a count of the head as built undecided."""
        monkeypatch.setattr(ex.Head, "winners", lambda self, H, tokens: np.zeros(len(tokens), dtype=bool))
        built = declare(
            "test.built-head",
            statement="the head as built wins at every h = w_t",
            lhs=claims.built_head_losses,
            relation="==",
            rhs=0,
            cases=claims.tangent_cases,
            register=False,
        )
        verdict = built.check(TANGENT, resolve("numpy"))
        assert verdict.status is Status.INCONCLUSIVE and "disagree" in verdict.method
        assert verdict.certificate["cleared"] and not verdict.certificate["confirmed"]

    def test_the_mutant_without_bias_loses_interior_tokens(self):
        mutant = REGISTRY[self.CLAIM].mutants["without-bias"]
        verdict = mutant.check(TANGENT, resolve("numpy"))
        assert verdict.status is Status.VIOLATED
        assert all(0 < t < 49 for t in verdict.certificate["confirmed"])  # the extremes win at their own h


class TestTop1WitnessCanFail:
    """A broken witness used to leave the claim inconclusive at worst ('never -1'): a wrong argmax is
    now confirmed exactly, a top-1 probability off by more than ε is certified by an interval, and
    one within rounding of ε is decided in balls."""

    CLAIM = "expressivity.top1-witness"

    def test_the_witness_holds_with_every_context_certified(self):
        verdict = check(self.CLAIM, TOP1)
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.TWO_SIDED
        assert verdict.certificate["largest_distance"] < 1e-12

    def test_a_radius_twice_too_large_is_violated(self, monkeypatch):
        radius = ex.circle_radius
        monkeypatch.setattr(ex, "circle_radius", lambda probs, V: 2 * radius(probs, V))
        verdict = check(self.CLAIM, TOP1)
        assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.TWO_SIDED
        assert verdict.certificate["probability_off"] == 4 and verdict.certificate["wrong_argmax"] == 0

    def test_a_witness_aimed_at_the_neighbour_is_violated_exactly(self, monkeypatch):
        construct = ex.construct_top1_witness
        monkeypatch.setattr(ex, "construct_top1_witness", lambda t, p, D, eps, V: construct((t + 1) % V, p, D, eps, V))
        verdict = check(self.CLAIM, TOP1)
        assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.EXACT
        assert verdict.certificate["confirmed"] and verdict.certificate["wrong_argmax"] == 4

    def test_a_probability_within_rounding_of_eps_is_decided_in_balls(self, monkeypatch):
        """Radii for p - ε put |top-1 - p| within the interval's width of ε: balls decide it, and balls
        too coarse to separate the two leave it inconclusive, never 'holds'."""
        radius = ex.circle_radius
        monkeypatch.setattr(ex, "circle_radius", lambda probs, V: radius(probs - TOP1.eps, V))
        verdict = check(self.CLAIM, TOP1)
        assert verdict.certificate["undecided"] > 0
        assert verdict.status in (Status.HOLDS, Status.VIOLATED) and "in balls" in verdict.method
        monkeypatch.setattr(exact, "BALL_PRECISIONS", (12,))
        assert check(self.CLAIM, TOP1).status is Status.INCONCLUSIVE


class TestGibbsCanFail:
    """The claim used to be a margin 'gap >= 0' with an undecided judge: now CE(Ñ) <= CE(P) is a lower
    bound, each cross-entropy computed from its definition, and Gibbs' identity, declared over the same
    quantities, is proved in the logarithms of the instance."""

    CLAIM = "expressivity.gibbs"

    def test_the_minimum_is_attained_exactly_at_the_empirical_distribution(self):
        verdict = check(self.CLAIM, FIT)
        assert verdict.status is Status.HOLDS and verdict.margin == 0 and verdict.certified_by is Certification.EXACT
        assert check(self.CLAIM, SOFTMAX).status is Status.HOLDS

    def test_the_bound_is_sharp(self):
        """CE(P) >= F CE(Ñ) fails at P = Ñ for every F > 1: 1.01 and 2 are refuted in balls."""
        for factor in (Fraction(101, 100), Fraction(2)):
            verdict = check(self.CLAIM, FIT, factor)
            assert verdict.status is Status.VIOLATED and verdict.margin < 0, factor

    @staticmethod
    def identity():
        """Gibbs' identity declared over the family's quantities: CE(P) − CE(Ñ) = Σ_c f_c KL(Ñ_c ‖ P_c)."""
        return declare(
            "test.gibbs-identity",
            statement="CE(P) − CE(Ñ) = Σ_c f_c KL(Ñ_c ‖ P_c)",
            lhs=claims.cross_entropy_model - claims.cross_entropy_empirical,
            relation="==",
            rhs=claims.weighted_kl,
            cases=claims.gibbs_cases,
            register=False,
        )

    def test_the_identity_is_proved_in_the_atoms(self):
        """Both sides are the same linear form in log n_cv, log n_c and L_c = log Σ e^{z_c}: exact, not a
        ball around 0; the unweighted sum is another form, refuted in balls."""
        identity = self.identity()
        for case in (FIT, SOFTMAX, claims.GibbsCase(V=64, contexts=64, seed=0, scale=400.0)):
            verdict = identity.check(case, resolve("numpy"))
            assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT, verdict.to_json()
        mutant = REGISTRY[self.CLAIM].mutants["unweighted-kl"].check(SOFTMAX, resolve("numpy"))
        assert mutant.status is Status.VIOLATED and mutant.certified_by is Certification.TWO_SIDED

    @pytest.mark.parametrize(
        "plant",
        [
            lambda gap, kl: (gap, 2 * kl),  # the KL side wrong
            lambda gap, kl: (-gap, -kl),  # both wrong, still consistent
        ],
    )
    def test_a_wrong_kl_gap_is_caught_by_the_reference(self, monkeypatch, plant):
        """kl_gap planted wrong reaches the KL sums' float route only: the exact route (the forms) still
        proves the identity, and the reference (mpmath from the counts and the logits) sees the measure."""
        from reference_check import quantity_disagreements

        kl_gap = ex.kl_gap
        monkeypatch.setattr(ex, "kl_gap", lambda *args, **kw: plant(*kl_gap(*args, **kw)))
        assert self.identity().check(SOFTMAX, resolve("numpy")).status is Status.HOLDS
        found = quantity_disagreements(claims.weighted_kl, [SOFTMAX], resolve("numpy"))
        assert found and "beyond its bound" in found[0], found

    def test_a_bound_within_rounding_is_decided_in_balls(self, monkeypatch):
        """F = CE(P)/CE(Ñ) in floats puts F CE(Ñ) within rounding of CE(P): balls decide, and balls too
        coarse leave the instance inconclusive."""
        verdict = check(self.CLAIM, SOFTMAX)
        factor = Fraction(verdict.lhs) / Fraction(verdict.rhs)
        verdict = check(self.CLAIM, SOFTMAX, factor)
        assert verdict.status in (Status.HOLDS, Status.VIOLATED) and verdict.method.startswith("interval-")
        monkeypatch.setattr(exact, "BALL_PRECISIONS", (12,))
        assert check(self.CLAIM, SOFTMAX, factor).status is Status.INCONCLUSIVE


class TestArgmaxableVsHullCanFail:
    """A disagreement with qhull used to be inconclusive ('never -1'): the pipeline's certificates are
    now re-checked exactly, so a disagreement or a forged certificate is a violation, and only a token
    left undecided is inconclusive."""

    CLAIM = "expressivity.argmaxable-vs-hull"

    def test_the_pipeline_agrees_with_the_hull(self):
        """Witnesses rest on a rigorous rounding bound (and integers for close rivals): two-sided."""
        verdict = check(self.CLAIM, HEAD)
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.TWO_SIDED
        assert verdict.certificate["argmaxable"] == verdict.certificate["hull_vertices"]

    def test_a_hull_missing_a_vertex_is_violated(self, monkeypatch):
        import scipy.spatial

        hull = scipy.spatial.ConvexHull

        class MissingOne(hull):
            """qhull answering with one vertex left out (its facets, which argmaxable's proposals
            come from, kept: the certified answer does not depend on them)."""

            @property
            def vertices(self):
                return super().vertices[1:]

        dropped = int(hull(claims.argmax_head(HEAD)).vertices[0])
        monkeypatch.setattr(scipy.spatial, "ConvexHull", MissingOne)
        verdict = check(self.CLAIM, HEAD)
        assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.TWO_SIDED
        assert verdict.certificate["disagree"] == [dropped]

    def test_a_forged_certificate_is_violated(self, monkeypatch):
        """A hull vertex declared 'never' with the weights λ = e_j of another row."""
        argmaxable = ex.argmaxable

        def forged(W, *args, **kwargs):
            result = argmaxable(W, *args, **kwargs)
            token = int(np.flatnonzero(result["argmaxable"])[0])
            result["argmaxable"][token], result["never"][token] = False, True
            result["combination"][token] = (np.array([token + 1]), (Fraction(1),))
            return result

        monkeypatch.setattr(ex, "argmaxable", forged)
        verdict = check(self.CLAIM, HEAD)
        assert verdict.status is Status.VIOLATED and len(verdict.certificate["bad_certificates"]) == 1

    def test_undecided_tokens_are_inconclusive_not_a_disagreement(self, monkeypatch):
        argmaxable = ex.argmaxable

        def undecided(W, *args, **kwargs):
            result = argmaxable(W, *args, **kwargs)
            result["never"][:] = False
            result["combination"].clear()
            return result

        monkeypatch.setattr(ex, "argmaxable", undecided)
        verdict = check(self.CLAIM, HEAD)
        assert verdict.status is Status.INCONCLUSIVE and verdict.certificate["disagree"] == []

    def test_the_mutant_is_refuted_by_every_row_inside_the_hull(self):
        """Each 'never' is a convex combination re-checked in Fractions: as many as qhull's non-vertices."""
        from scipy.spatial import ConvexHull

        verdict = REGISTRY[self.CLAIM].mutants["every-token-argmaxable"].check(HEAD, resolve("numpy"))
        inside = HEAD.V + HEAD.interior - len(ConvexHull(claims.argmax_head(HEAD)).vertices)
        assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.EXACT
        assert verdict.lhs == verdict.certificate["never"] == inside


class TestAWrongMeasurementIsCaughtByItsReference:
    """Issues 18 and 26: a quantity measured as the wrong thing, which every claim still "holds" with, is
    caught by its reference (mpmath from the counts and the built logits; the line head's ends in Fractions
    and a bisection in mpmath)."""

    CLAIM = REGISTRY["expressivity.gibbs"]
    NATS = claims.cross_entropy_model.measure_fn

    @classmethod
    def in_bits(cls, ctx):
        """CE(P) reported in bits: CE(Ñ) ≤ CE(P) ≤ CE(P)/ln 2, so the lower bound still holds."""
        measured = cls.NATS(ctx)
        return replace(measured, value=measured.value / np.log(2))

    def test_the_wrong_unit_passes_the_claims_but_not_the_reference(self, monkeypatch):
        from reference_check import quantity_disagreements

        numpy = resolve("numpy")
        cases = self.CLAIM.witnesses(16)
        assert not quantity_disagreements(claims.cross_entropy_model, cases, numpy)
        monkeypatch.setattr(claims.cross_entropy_model, "measure_fn", self.in_bits)
        assert all(self.CLAIM.check(c, numpy).status is Status.HOLDS for c in cases)
        found = quantity_disagreements(claims.cross_entropy_model, cases, numpy)
        # only the one-hot fit CE(P) = CE(Ñ) = 0 reads the same in either unit
        assert len(found) == len(cases) - 1, found

    def test_the_top_one_at_the_midpoint_is_caught(self, monkeypatch):
        """sup q_t measured at the middle of the token's interval (L + U)/2 instead of its maximum: never
        larger, so max(inf q_t, 1/V + 1/(4V²) + 3/4 − sup q_t) only grows and the claim still holds."""
        numpy = resolve("numpy")
        cases = [c for c in claims.line_heads.witnesses(16) if c.shape != "concurrent"]
        assert not quantity_disagreements_of(claims.middle_top1_sup, cases)

        def at_the_midpoint(ctx):
            head = claims.line_instance(ctx)
            ends = claims._line_float_ends(head)
            if not isinstance(ends, tuple):  # an empty interval: sup q_t = 0 either way
                return supremum(ctx)
            g = claims._line_sums(head, (ends[0] + ends[2]) / 2)[0]
            return claims._enclosed(claims._q_of(g))

        supremum = claims.middle_top1_sup.measure_fn

        monkeypatch.setattr(claims.middle_top1_sup, "measure_fn", at_the_midpoint)
        claim = REGISTRY["expressivity.d1-top1-fails"]
        assert all(claim.check(c, numpy).status is Status.HOLDS for c in cases)
        assert len(quantity_disagreements_of(claims.middle_top1_sup, cases)) >= len(cases) // 2


#: 3/4 and 1/V + 1/(4V²) at V = 3, as python-flint rationals (what a ball compares with).
THREE_QUARTERS, LOW_AT_3 = exact.fmpq_of(Fraction(3, 4)), exact.fmpq_of(Fraction(1, 3) + Fraction(1, 36))


def quantity_disagreements_of(quantity, cases):
    from reference_check import quantity_disagreements

    return quantity_disagreements(quantity, cases, resolve("numpy"))


class TestD1Top1Fails:
    """EX.3 item 4 (issue 30): at D = 1, with a bias, the middle token cannot be the strict argmax both
    with a top-1 probability >= 3/4 and with one <= 1/V + 1/(4V²); at 1/2 in place of that, it can."""

    CLAIM = REGISTRY["expressivity.d1-top1-fails"]
    WIDE = claims.LineHeadCase(V=3, shape="tangent", seed=0, scale=10.0)

    @staticmethod
    def sides(case):
        ctx = Context(case, resolve("numpy"))
        with exact.precision(128):
            return claims.middle_top1_sup.exact(ctx), claims.middle_top1_inf.exact(ctx)

    def test_a_token_that_reaches_three_quarters_stays_above_the_low_threshold(self):
        """Tangent lines spread wide: the middle token reaches nearly 1 at h = w_t, so the claim rests on
        its infimum, near 1/2 at the ties with its neighbours, far above 1/3 + 1/36."""
        sup, inf = self.sides(self.WIDE)
        assert sup.ball > THREE_QUARTERS and inf.ball > LOW_AT_3
        verdict = self.CLAIM.check(self.WIDE, resolve("numpy"))
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.TWO_SIDED

    def test_a_token_nearly_tied_stays_below_three_quarters(self):
        """Concurrent lines jittered by 10⁻⁹: where the middle token wins, every token nearly ties, so its
        infimum is near 1/V (below the threshold) and its supremum too."""
        case = claims.LineHeadCase(V=3, shape="concurrent", seed=1, jitter=1e-9)
        sup, inf = self.sides(case)
        assert inf.ball < LOW_AT_3 and sup.ball < THREE_QUARTERS
        assert self.CLAIM.check(case, resolve("numpy")).status is Status.HOLDS

    def test_a_token_that_never_wins_reaches_nothing(self):
        """Exactly concurrent lines up to rounding: the middle token's interval is empty or a sliver; where
        it is empty, sup q_t = 0 and inf q_t = 1, exact rationals."""
        case = claims.LineHeadCase(V=3, shape="concurrent", seed=0)
        ends = claims.line_ends(Context(case, resolve("numpy"))).ends
        sup, inf = self.sides(case)
        assert ends is not None or (sup.rational and inf.rational and (sup.value, inf.value) == (0, 1))
        assert self.CLAIM.check(case, resolve("numpy")).status is Status.HOLDS

    def test_the_mutant_at_one_half_is_refuted(self):
        mutant = self.CLAIM.mutants["reaches-3/4-and-1/2"]
        verdict = mutant.check(self.WIDE, resolve("numpy"))
        assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.TWO_SIDED

    def test_the_supremum_is_no_less_than_a_grid_of_the_interval(self):
        """An independent lower check of sup q_t: q_t on a grid of (L, U) in mpmath never exceeds the
        exact ball's upper end, and its largest value comes within the grid's resolution."""
        import mpmath

        ctx = Context(self.WIDE, resolve("numpy"))
        ends = claims.line_ends(ctx)
        low, high = (mpmath.mpf(int(x.p)) / int(x.q) for x in ends.ends)
        terms = [
            (mpmath.mpf(int(a.p)) / int(a.q), mpmath.mpf(int(b.p)) / int(b.q))
            for a, b in zip(ends.alpha, ends.beta, strict=True)
        ]
        grid = [low + (high - low) * k / 400 for k in range(1, 400)]
        values = [1 / mpmath.fsum(mpmath.exp(a * h + b) for a, b in terms) for h in grid]
        sup, _ = self.sides(self.WIDE)
        assert max(values) <= mpmath.mpf(float(sup.ball.upper()))
        assert max(values) > float(sup.ball.lower()) - 1e-3


class TestTheHullReference:
    """The exhaustive reference of ``argmaxable-vs-hull``: facets from exact orientations at D <= 3."""

    @pytest.mark.parametrize("D", [2, 3])
    def test_the_facets_vertices_are_qhulls(self, D):
        from scipy.spatial import ConvexHull

        for seed in range(3):
            W = np.random.default_rng(seed).standard_normal((40, D))
            subsets, normals = claims.exhaustive_facets(W)
            vertices = np.zeros(len(W), dtype=bool)
            vertices[np.unique(subsets)] = True
            expected = np.zeros(len(W), dtype=bool)
            expected[ConvexHull(W).vertices] = True
            np.testing.assert_array_equal(vertices, expected)
            # outward: every other point lies strictly behind each facet
            base = W[subsets[:, 0]]
            assert np.all(np.einsum("sd,svd->sv", normals, W[None] - base[:, None]) < 1e-12)

    def test_a_point_within_rounding_of_an_edge_is_decided_exactly(self):
        """(1/2, 1/2 + 2⁻⁵³) lies outside the edge from (1, 0) to (0, 1) by less than float64 can show
        with a tolerance: the exact sign makes it a vertex."""
        W = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5 + 2.0**-53]])
        subsets, _ = claims.exhaustive_facets(W)
        assert set(np.unique(subsets)) == {0, 1, 2, 3}
        assert claims.exhaustive_facets(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])) is None

    @pytest.mark.parametrize(
        "case",
        [
            claims.ArgmaxHeadCase(V=3, D=2, seed=4),
            claims.ArgmaxHeadCase(V=12, D=2, seed=1, interior=2, twins=2),
            claims.ArgmaxHeadCase(V=30, D=3, seed=2, interior=3, twins=1),
            claims.ArgmaxHeadCase(V=8, D=4, seed=3, interior=1, twins=1),
        ],
    )
    def test_duplicated_rows_are_no_vertex_and_the_claim_holds(self, case):
        argmaxable, vertex, _ = claims.hull_truth(claims.argmax_head(case), case.D)
        assert (argmaxable == vertex).all()
        verdict = REGISTRY["expressivity.argmaxable-vs-hull"].check(case, resolve("numpy"))
        assert verdict.status is Status.HOLDS, verdict.to_json()

    def test_a_head_that_does_not_span_D_is_refused(self):
        with pytest.raises(InputError, match="V >= D"):
            claims.argmax_head(claims.ArgmaxHeadCase(V=3, D=3))


@pytest.mark.parametrize(
    ("case", "classes"),
    [
        (
            claims.GibbsCase(V=2, contexts=1, seed=2, exact_fit=True),
            {"V = 2 or 3", "one to three contexts", "P = Ñ (equality)", "every row one-hot (CE(Ñ) = 0)"},
        ),
        (claims.GibbsCase(V=64, contexts=64, seed=0, scale=400.0), {"model probabilities below the normal range"}),
        (claims.GibbsCase(V=64, contexts=64, seed=0, scale=0.5), set()),
    ],
)
def test_gibbs_boundary_classes(case, classes):
    assert {name for name, test in claims.GIBBS_BOUNDARY.items() if test(case)} == classes


@pytest.mark.parametrize("claim_id", ["gibbs", "top1-witness", "d1-bias-argmax", "argmaxable-vs-hull", "d1-top1-fails"])
def test_the_witnesses_include_the_edges(claim_id):
    """verify's witnesses at any V include the boundary cases the strategy draws (the smallest sizes,
    equality and one-hot fits, underflow, probabilities at the ends, simplices and ties)."""
    claim = REGISTRY[f"expressivity.{claim_id}"]
    reached = {name for name, test in claim.boundary_classes.items() for case in claim.witnesses(1024) if test(case)}
    assert reached == set(claim.boundary_classes), set(claim.boundary_classes) - reached


def test_the_count_claims_carry_a_closeness_for_the_search():
    numpy = resolve("numpy")
    top1 = REGISTRY["expressivity.top1-witness"].measure(claims.Top1Case(V=16), numpy, Fraction(1))
    assert 0 <= top1.certificate["closeness"] < 1
    tangent = REGISTRY["expressivity.d1-bias-argmax"].measure(claims.TangentCase(V=4096), numpy, Fraction(1))
    assert tangent.certificate["closeness"] < 0


class TestTheWindowedTangentScreen:
    """``tangent_screen`` screens each token against its nearest rivals in the order of the weights and
    bounds the rest together, in O(V) after a sort; the dense screen against every rival is its reference."""

    @staticmethod
    def heads():
        rng = np.random.default_rng(7)
        for V, seed in ((3, 0), (40, 1), (300, 2), (2048, 3)):
            yield ex.tangent_head(V, seed)[0]
        clustered = np.concatenate([rng.normal(size=50), 1.0 + 1e-9 * rng.normal(size=50), [1.0, 1.0, -(1e300**0)]])
        yield clustered[:, None]  # near-ties, a duplicated weight
        yield np.array([0.0, 5e-324, 1e-320, 1e-300, 1.0, 1e150])[:, None]  # subnormal spacing, huge weights

    @pytest.mark.parametrize("window", [1, 2, 8])
    def test_it_answers_a_subset_of_the_dense_screen(self, window):
        for W in self.heads():
            won, lost = claims.tangent_screen(W, window=window)
            dense_won, dense_lost = claims.tangent_screen_all_rivals(W)
            assert not (won & ~dense_won).any() and not (lost & ~dense_lost).any()

    def test_it_answers_as_the_dense_screen_on_the_witnesses(self):
        for case in REGISTRY["expressivity.d1-bias-argmax"].witnesses(4096):
            W = ex.tangent_head(case.V, case.seed)[0]
            for mine, dense in zip(claims.tangent_screen(W), claims.tangent_screen_all_rivals(W), strict=True):
                assert np.array_equal(mine, dense), case

    def test_the_far_rivals_bound_is_above_its_exact_value(self):
        """x²/2 − D²/2 + 2E evaluated in rationals from the same float inputs never exceeds the float bound."""
        rng = np.random.default_rng(11)
        g = tolerance.gamma(4, 2.0**-53)
        x = np.concatenate([rng.normal(size=200) * 10.0 ** rng.integers(-300, 150, 200), [0.0, 5e-324, -1e-310]])
        distance = np.abs(rng.normal(size=x.size)) * 10.0 ** rng.integers(-320, 100, x.size)
        distance[:3] = [np.inf, 5e-324, 0.0]
        largest = float(np.max(np.abs(x)))
        bound = claims._far_rivals_upper(x, distance, largest, g)
        tiny = Fraction(2) ** -1074
        for xi, di, bi in zip(x, distance, bound, strict=True):
            if not np.isfinite(di):
                assert bi == -np.inf
                continue
            X, D, M, G = Fraction(xi), Fraction(di), Fraction(largest), Fraction(g)
            exact_E = G * (M * abs(X) + M * M / 2) + 4 * tiny
            assert Fraction(bi) >= X * X / 2 - D * D / 2 + 2 * exact_E, (xi, di)


def test_the_tangent_exact_route_is_the_integer_one():
    """``tangent_head_wins`` (a rounding-bounded screen of the rivals, the rest in rationals) answers as
    the reference in integers against every rival, on heads with near-ties, duplicates and huge weights."""
    heads = list(TestTheWindowedTangentScreen.heads())
    heads.append(np.array([1.0, 1.0 + 2**-52, 1.0 + 2**-51, 3.0, -3.0])[:, None])
    for W in heads:
        if not np.all(np.isfinite(W * W)):
            continue
        for t in range(len(W)):
            assert claims.tangent_head_wins(W, t) == claims.tangent_head_wins_in_integers(W, t), (W.ravel(), t)
