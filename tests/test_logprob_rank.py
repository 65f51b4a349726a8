"""The certified rank of a model's log-probabilities (checks/models/logprob_rank.py), on float32 forward
passes built here: both ends against a 50-digit reference, and the factorization check failing on heads
that are not what it is told."""

from __future__ import annotations

import numpy as np
import pytest

from rankwall.checks.models import logprob_rank as lr
from rankwall.theory.validation import InputError

torch = pytest.importorskip("torch")


def forward(N=48, V=70, D=6, seed=0, scale=3.0):
    """H and W in float32 and the float32 logits torch computes from them (a tiny model's last step)."""
    rng = np.random.default_rng(seed)
    H = (scale * rng.standard_normal((N, D))).astype(np.float32)
    W = rng.standard_normal((V, D)).astype(np.float32)
    logits = (torch.from_numpy(H) @ torch.from_numpy(W).T).numpy()
    return H, W, logits


def served(logits):
    return torch.log_softmax(torch.from_numpy(logits), dim=-1).numpy()


def reference_rank(H, W, b=None, digits=50):
    """rank of the exact log softmax(H Wᵀ + 1bᵀ) of the float inputs, from its singular values at 50
    digits (mpmath): the count above 10^-25, with the gap it sits in."""
    import mpmath

    mpmath.mp.dps = digits
    b = np.zeros(W.shape[0]) if b is None else b
    rows = []
    for h in H.astype(np.float64):
        z = [
            mpmath.fsum(mpmath.mpf(float(x)) * mpmath.mpf(float(y)) for x, y in zip(h, w, strict=True))
            + mpmath.mpf(float(c))
            for w, c in zip(W.astype(np.float64), b, strict=True)
        ]
        lse = mpmath.log(mpmath.fsum(mpmath.exp(x) for x in z))
        rows.append([x - lse for x in z])
    L = mpmath.matrix(rows)
    sigma = sorted((abs(s) for s in mpmath.svd_r(L, compute_uv=False)), reverse=True)
    centred = mpmath.matrix([[x - mpmath.fsum(r) / len(r) for x in r] for r in rows])
    sigma_c = sorted((abs(s) for s in mpmath.svd_r(centred, compute_uv=False)), reverse=True)
    count = lambda s: sum(1 for x in s if x > mpmath.mpf(10) ** -25)  # noqa: E731
    return count(sigma), count(sigma_c)


class TestTheModelsOwnLogProbabilities:
    def test_both_ends_meet_at_d_plus_one_and_the_centred_rank_is_d(self):
        H, W, logits = forward(N=20, V=24, D=4)
        result = lr.model_rank(H, W, None, served(logits), logits)
        assert reference_rank(H, W) == (5, 4)
        assert (result.log_probability.lower, result.log_probability.upper) == (5, 5)
        assert (result.centred.lower, result.centred.upper) == (4, 4)
        assert result.hidden_size_recovered == 4 and result.residual <= result.residual_bound

    def test_fewer_contexts_than_d_plus_one_give_rank_n(self):
        H, W, logits = forward(N=4, D=6)
        result = lr.model_rank(H, W, None, served(logits), logits)
        assert result.log_probability.pinned == 4 and result.centred.pinned == 4
        assert result.hidden_size_recovered is None  # capped by the contexts: says nothing about D

    def test_a_head_of_rank_below_d_is_left_open_not_misread(self):
        """Two equal columns: rank [W, 1] = D, so rank L* = D; the upper end from the D + 1 columns does
        not see it, and the interval stays open: no hidden size is claimed."""
        H, W, _ = forward(D=5)
        W[:, 4] = W[:, 3]
        logits = (torch.from_numpy(H) @ torch.from_numpy(W).T).numpy()
        result = lr.model_rank(H, W, None, served(logits), logits)
        assert result.log_probability.lower == 5 and result.log_probability.upper == 6
        assert result.hidden_size_recovered is None

    def test_the_rounding_bound_covers_the_float32_forward_and_its_margin_is_recorded(self):
        H, W, logits = forward()
        result = lr.model_rank(H, W, None, served(logits), logits)
        ends = result.log_probability
        assert 0 < result.residual <= result.residual_bound
        assert ends.last_above > ends.margin >= ends.next
        assert ends.entry_error >= result.residual

    @pytest.mark.parametrize(
        "change",
        [
            lambda z, rng: z + rng.standard_normal(z.shape[1]).astype(np.float32),  # a bias it was not told of
            lambda z, rng: 10 * np.tanh(z / 10),  # a soft cap
            lambda z, rng: z / 2,  # a temperature
        ],
    )
    def test_outputs_that_are_not_the_factorization_fail_the_check(self, change):
        """The served log P comes from changed logits; told the plain head, the check refuses the upper
        end and trusts no end (a changed head could have any rank)."""
        H, W, logits = forward(N=48, V=70, D=6)
        changed = change(logits.astype(np.float64), np.random.default_rng(1)).astype(np.float32)
        result = lr.model_rank(H, W, None, served(changed), changed)
        assert result.residual > result.residual_bound
        assert result.log_probability.upper == 48 and result.log_probability.lower == 0
        assert result.hidden_size_recovered is None

    def test_a_head_with_a_bias_is_factored_through_d_plus_two(self):
        H, W, _ = forward(N=20, V=24, D=4)
        b = np.random.default_rng(2).standard_normal(24).astype(np.float32)
        logits = (torch.from_numpy(H) @ torch.from_numpy(W).T + torch.from_numpy(b)).numpy()
        result = lr.model_rank(H, W, b, served(logits), logits)
        assert reference_rank(H, W, b) == (6, 5)
        assert result.log_probability.pinned == 6 and result.hidden_size_recovered == 5

    @pytest.mark.parametrize(
        ("shapes", "message"),
        [
            (lambda H, W, s, z: (H[:-1], W, s, z), "do not fit"),
            (lambda H, W, s, z: (H, W, s.astype(np.float64), z), "expected float32"),
            (lambda H, W, s, z: (H, W, s, z[:, :-1]), "expected float32"),
        ],
    )
    def test_bad_shapes_are_refused(self, shapes, message):
        H, W, logits = forward()
        H, W, log_p, logits = shapes(H, W, served(logits), logits)
        with pytest.raises(InputError, match=message):
            lr.model_rank(H, W, None, log_p, logits)


def test_the_comparison_heads():
    """Beside the model: a random head of the same shape (D + 1, centred D) and the biased head
    (D + 2, centred D + 1): reading the centred rank of a biased head gives D + 1."""
    H, W, logits = forward(N=40, V=60, D=5)
    result = lr.log_probability_rank(H, W, None, logits)
    assert (result.model.log_probability.pinned, result.model.hidden_size_recovered) == (6, 5)
    assert (result.random_head.log_probability.pinned, result.random_head.hidden_size_recovered) == (6, 5)
    assert (result.with_bias.log_probability.pinned, result.with_bias.hidden_size_recovered) == (7, 6)
    record = result.to_json()
    assert (record["lower"], record["upper"], record["hidden_size_recovered"]) == (6, 6, 5)
    assert record["head_with_bias"]["centred"]["lower"] == 6
    assert {"lower_method", "upper_method", "singular_value_gap", "factorization_residual"} <= set(record)


def test_row_blocks_do_not_change_the_answer(monkeypatch):
    H, W, logits = forward(N=30, V=50, D=4)
    whole = lr.model_rank(H, W, None, served(logits), logits)
    monkeypatch.setattr(lr, "BLOCK_ENTRIES", 7 * 50)
    blocked = lr.model_rank(H, W, None, served(logits), logits)
    assert (blocked.log_probability.pinned, blocked.centred.pinned) == (whole.log_probability.pinned, 4)
    assert blocked.residual == pytest.approx(whole.residual, rel=1e-12)
