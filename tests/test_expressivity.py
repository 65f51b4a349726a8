"""Tests of theory/expressivity.py: Gibbs, the circle witness, the D = 1 contrast."""

from __future__ import annotations

import numpy as np
import pytest

from theory import expressivity as ex
from theory._validation import InputError


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


class TestArgmaxableTokens:
    @pytest.mark.parametrize("D", [2, 3, 4])
    def test_lp_pipeline_agrees_with_the_convex_hull(self, D):
        from scipy.spatial import ConvexHull

        W = np.random.default_rng(D).standard_normal((150, D))
        decided = ex.argmaxable(W)["argmaxable"]
        vertices = np.zeros(150, dtype=bool)
        vertices[ConvexHull(W).vertices] = True
        assert (decided == vertices).all()

    def test_interior_rows_never_win_and_every_answer_is_rechecked(self):
        W = np.vstack([ex.circle_head(12), [[0.1, 0.0]]])
        result = ex.argmaxable(W)
        assert result["argmaxable"].tolist() == [True] * 12 + [False]
        assert result["method"][12] == f"LP margin <= {ex.LP_MARGIN_FLOOR:g}"
        assert {str(m) for m in result["method"][:12]} <= {*ALL_CERTIFICATES, "reflections", "LP, re-checked"}

    def test_duplicate_rows_lose_to_their_twin_unless_their_bias_is_larger(self):
        W = np.vstack([ex.circle_head(6), ex.circle_head(6)[:2]])
        b = np.array([0.0, 0.5, 0, 0, 0, 0, 0.0, 0.0])
        result = ex.argmaxable(W, b)
        # rows 0 and 6 tie exactly (both lose); row 1 outbids its twin 7 and still wins.
        assert np.flatnonzero(~result["argmaxable"]).tolist() == [0, 6, 7]
        assert np.flatnonzero(result["never"]).tolist() == [0, 6, 7]
        assert result["method"][[0, 6, 7]].tolist() == ["duplicate row"] * 3

    @pytest.mark.parametrize("D", [8, 16])
    def test_cutting_plane_lp_agrees_with_the_full_lp(self, D):
        """Points drawn inside a ball with a few on its surface: most need the LP."""
        rng = np.random.default_rng(D)
        W = rng.standard_normal((300, D)) * 0.3
        W[:20] /= np.linalg.norm(W[:20], axis=1, keepdims=True)
        b = np.zeros(300)
        starts = ex.whitened_directions(W, np.arange(300))
        for token in range(0, 300, 15):
            full, _ = ex.argmax_lp(W, b, token)
            _, h = ex.cutting_plane_lp(W, b, token, starts[token])
            assert (full > ex.LP_MARGIN_FLOOR) == (h is not None)
            if h is not None:
                assert ex.strict_winner(W, b, h, token)

    def test_a_bias_can_make_interior_rows_argmaxable(self):
        W, b = ex.tangent_head(10, 1)
        assert ex.argmaxable(W, b)["argmaxable"].all()
        assert ex.argmaxable(W)["argmaxable"].sum() == 2

    def test_tokens_that_win_only_at_infinity(self):
        """w_2 = w_0 + w_1 halves: with a huge bias gap, only the direction matters."""
        W = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
        b = np.array([0.0, 0.0, -1e6])
        assert ex.argmaxable(W, b)["argmaxable"].all()

    @pytest.mark.parametrize(
        ("W", "bias", "message"),
        [
            (np.ones(3), None, "W: expected a (V x D) head"),
            (np.full((3, 2), np.nan), None, "W: non-finite value"),
            (np.ones((3, 2)), np.ones(2), "bias: shape (2,) does not match"),
            (np.ones((3, 2)), np.array([0.0, np.inf, 0.0]), "bias: non-finite value"),
        ],
    )
    def test_bad_heads_are_refused(self, W, bias, message):
        with pytest.raises(InputError) as error:
            ex.argmaxable(W, bias)
        assert message in str(error.value)

    @pytest.mark.parametrize("tokens", [[0, 3], [-1], [[0, 1]], [0.5]])
    def test_bad_token_ids_are_refused(self, tokens):
        with pytest.raises(InputError, match="tokens: expected a 1-D array of token ids in"):
            ex.argmaxable(ex.circle_head(3), tokens=np.array(tokens))

    def test_restricting_to_some_tokens_decides_only_those(self):
        W = np.vstack([ex.circle_head(8), [[0.0, 0.0]]])
        result = ex.argmaxable(W, tokens=[1, 8])
        assert result["argmaxable"].tolist() == [False, True] + [False] * 7
        assert result["method"][8] == f"LP margin <= {ex.LP_MARGIN_FLOOR:g}" and result["method"][0] == ""


def test_rankwall_argmax(capsys, tmp_path):
    import json

    from checks.cli import EXIT_OK, EXIT_USAGE, main

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
