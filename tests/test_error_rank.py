"""Tests of theory/error_rank.py and the error-rank / logprob-rank claims.

Three routes to a rank are cross-checked: the O(V) dominance certificate, a dense SVD with a
Weyl margin, and exact ranks over the integers (python-flint).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sparse

from checks import exact, tolerance
from checks.claims.error_rank import dense_rank_lower, rank_interval
from checks.data import characters, read_corpus
from theory import error_rank as er
from theory._validation import InputError

U = 2.0**-53


class TestUniqueContinuationsForceRank:
    """Prop. A.5: the error matrix of any positive P has rank at least min(k, V - 1)."""

    @pytest.mark.parametrize(("V", "k"), [(5, 1), (5, 4), (5, 5), (40, 17), (64, 63), (64, 64)])
    def test_certificate_dense_svd_and_exact_agree(self, V, k):
        logits, tokens = er.construct_unique_continuation(V, k, 3, seed=V + k)
        lower, upper, _, _ = rank_interval(logits, tokens)
        assert lower == upper == min(k, V - 1)
        assert dense_rank_lower(logits, tokens) == min(k, V - 1)

    def test_dominance_margins_are_the_mass_outside_the_token_set(self):
        logits, tokens = er.construct_unique_continuation(30, 12, 4, seed=1)
        P = logits.probabilities(slice(None))
        outside = np.setdiff1d(np.arange(30), tokens)
        np.testing.assert_allclose(er.dominance_margins(logits, tokens), P[:, outside].sum(axis=1), rtol=64 * U)

    def test_submatrix_is_strictly_diagonally_dominant_with_varah_bound(self):
        logits, tokens = er.construct_unique_continuation(50, 20, 5, seed=2)
        M = er.prediction_error_submatrix(logits.probabilities(slice(None)), tokens)
        off = np.abs(M).sum(axis=1) - np.abs(np.diag(M))
        margins = er.dominance_margins(logits, tokens)
        np.testing.assert_allclose(np.abs(np.diag(M)) - off, margins, atol=64 * U)
        sigma_min = np.linalg.svd(M, compute_uv=False)[-1]
        assert sigma_min >= er.varah_bound(margins) * (1 - 1e-12)

    def test_streaming_never_holds_more_than_a_block(self, monkeypatch):
        logits, tokens = er.construct_unique_continuation(200, 50, 3, seed=3)
        whole = er.dominance_margins(logits, tokens)
        monkeypatch.setattr(er, "STREAM_BLOCK_ENTRIES", 200 * 3)
        np.testing.assert_array_equal(er.dominance_margins(logits, tokens), whole)

    def test_probability_floor_is_a_lower_bound(self):
        logits, _ = er.construct_unique_continuation(40, 40, 6, seed=4, scale=3.0)
        P = logits.probabilities(slice(None))
        assert np.log(P.min()) >= er.log_probability_floor(logits)

    def test_exact_rank_of_a_rational_positive_P(self):
        """A strictly positive rational P (integer weights): exact rank over the integers."""
        rng = np.random.default_rng(5)
        for V, k in ((6, 3), (6, 6), (9, 8)):
            weights = rng.integers(1, 9, size=(k, V))
            tokens = rng.permutation(V)[:k]
            scaled = -weights.copy()  # rows of (P - Ñ) times their totals
            scaled[np.arange(k), tokens] += weights.sum(axis=1)
            rank, _ = exact.exact_rank(scaled)
            assert rank == min(k, V - 1)


class TestWhereTheSeedsStatementStops:
    """With zeros in P (underflow, sparse outputs) the rank is set by the graph of P."""

    def test_a_perfect_fit_has_rank_zero(self):
        P_T = np.eye(5, dtype=np.int64)  # P equal to Ñ on the unique rows: P has zeros
        assert er.attracting_components(P_T) == 5
        assert exact.exact_rank(np.diag(P_T.sum(axis=1)) - P_T)[0] == 0 == er.stochastic_defect_rank(P_T)

    def test_float_underflow_breaks_the_k_equals_V_case(self):
        """Logits of scale 1e4 underflow float64 softmax rows: the float P_T has zeros, its graph
        has two attracting classes, and the float rank(I - P_T) is V - 2 < V - 1 (exactly)."""
        V = 6
        logits, tokens = er.construct_unique_continuation(V, V, 2, seed=0, scale=1e4)
        P_T = logits.probabilities(slice(None))[:, tokens]
        assert er.attracting_components(P_T) == 2
        rows = [[Fraction(x) for x in row] for row in P_T]
        scaled = []  # rows of I - P_T, normalised exactly, times a common denominator
        for i, row in enumerate(rows):
            total = sum(row)
            entries = [(Fraction(int(i == j)) - x / total) for j, x in enumerate(row)]
            denominator = math.lcm(*(e.denominator for e in entries))
            scaled.append([int(e * denominator) for e in entries])
        assert exact.exact_rank(np.array(scaled, dtype=object))[0] == V - 2

    @pytest.mark.parametrize("closed", [1, 2, 5])
    def test_rank_is_n_minus_attracting_components(self, closed):
        for seed in range(5):
            weights = er.construct_stochastic_with_classes(25, closed, seed)
            assert er.attracting_components(weights) == closed
            rank, _ = exact.exact_rank(np.diag(weights.sum(axis=1)) - weights)
            assert rank == 25 - closed

    def test_wcdd_detection(self):
        assert er.is_weakly_chained_diagonally_dominant(np.array([[2, -1, 0], [0, 1, -1], [0, 0, 1]]))
        assert not er.is_weakly_chained_diagonally_dominant(np.array([[1, -1], [-1, 1]]))  # no strict row
        assert not er.is_weakly_chained_diagonally_dominant(np.array([[1, -1, 0], [-1, 1, 0], [0, 0, 2]]))


class TestMiniBatches:
    def test_batch_unique_contexts_have_one_batch_token_and_several_data_tokens(self):
        counts = er.construct_zipf_language(50, 200, seed=0, unique_share=0.2)
        batch = er.sample_batch(counts, 150, seed=1)
        rows, tokens = er.batch_unique_continuations(counts, batch)
        assert len(rows) == len(tokens) == len(set(tokens.tolist())) > 0
        for row, token in zip(rows, tokens, strict=True):
            assert batch[row].nnz == 1 and batch[row].indices[0] == token and counts[row].nnz >= 2

    def test_batch_is_a_sub_multiset(self):
        counts = er.construct_zipf_language(30, 100, seed=2)
        batch = er.sample_batch(counts, 40, seed=3)
        assert batch.sum() == 40 and (counts - batch).min() >= 0


class TestCounts:
    def test_ngram_counts_on_a_tiny_stream(self):
        counts, contexts = er.ngram_counts([0, 1, 0, 1, 2], order=1, V=3)
        assert contexts.tolist() == [[0], [1]]
        assert counts.toarray().tolist() == [[0, 2, 0], [1, 0, 1]]
        rows, tokens = er.unique_continuations(counts)
        assert rows.tolist() == [0] and tokens.tolist() == [1]

    def test_fast_and_generic_context_encodings_agree(self):
        ids = np.random.default_rng(0).integers(0, 7, size=400)
        fast, contexts = er.ngram_counts(ids, 3, 7)
        windows = np.lib.stride_tricks.sliding_window_view(ids, 4)
        generic, _ = np.unique(windows[:, :3], axis=0, return_inverse=True)
        assert np.array_equal(contexts, generic) and fast.sum() == len(windows)

    def test_tinyshakespeare_character_trigrams(self):
        stream = characters(read_corpus("tinyshakespeare.txt"))
        counts, _ = er.ngram_counts(stream.ids, 3, stream.V)
        _, tokens = er.unique_continuations(counts)
        assert stream.V == 65 and counts.shape == (11556, 65) and len(tokens) == 60


class TestLogProbabilities:
    @pytest.mark.parametrize("rank", [0, 1, 4, 9])
    def test_log_softmax_adds_one_and_only_one(self, rank):
        A = er.construct_low_rank_integers(30, 40, rank, seed=rank)
        exact_rank_A, _ = exact.exact_rank(A)
        assert exact_rank_A == rank
        L = er.log_softmax(A * 3)
        sigma = np.linalg.svd(L, compute_uv=False)
        margin = tolerance.log_softmax_error(A * 3, L, U) + tolerance.svd_rank_margin(L.shape, U, 0.0, sigma[0])
        assert int(np.sum(sigma > margin)) == rank + 1

    def test_log_softmax_rows_normalise(self):
        L = er.log_softmax(np.array([[1000.0, 0.0, -1000.0], [3.0, 3.0, 3.0]]))
        np.testing.assert_allclose(np.exp(L).sum(axis=1), 1.0, rtol=4 * U)

    def test_row_shift_changes_rank_by_one_at_most(self):
        A = er.construct_low_rank_integers(10, 12, 3, seed=0)
        shifted = er.row_shift(A, np.arange(10))
        assert abs(exact.exact_rank(shifted)[0] - exact.exact_rank(A)[0]) == 1
        assert exact.exact_rank(er.row_shift(A, np.zeros(10, dtype=np.int64)))[0] == 3


class TestExactRank:
    def test_rank_mod_p_is_a_lower_bound(self):
        A = er.construct_low_rank_integers(20, 20, 12, seed=1)
        assert exact.rank_mod_prime(A, prime=3) <= exact.exact_rank(A)[0] == 12

    def test_rank_mod_a_small_prime_can_be_strictly_lower(self):
        A = np.array([[2, 0], [0, 1]])
        assert exact.rank_mod_prime(A, prime=2) == 1 < exact.exact_rank(A)[0] == 2

    def test_floats_are_refused(self):
        with pytest.raises(InputError, match=r"matrix: expected a 2-D integer matrix \(scale rational rows"):
            exact.exact_rank(np.ones((2, 2)))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: er.validated_counts(np.array([[1, -1]])), "counts: negative count"),
        (lambda: er.validated_counts(np.array([[1.5, 1]])), "counts: fractional count 1.5"),
        (lambda: er.validated_counts(np.array([[np.nan, 1]])), "counts: non-finite count"),
        (lambda: er.validated_counts(np.array([[1], [2]])), "V=1 is out of range"),
        (lambda: er.validated_counts(np.zeros((0, 3))), "there are no contexts"),
        (lambda: er.validated_counts(np.array([[0, 0], [1, 0]])), "context 0 has no observed next token"),
        (lambda: er.batch_unique_continuations(np.ones((2, 3)), np.ones((2, 4))), "batch: shape (2, 4) differs"),
        (lambda: er.ngram_counts([0, 5], 1, 3), "tokens: ids must lie in [0, 3)"),
        (lambda: er.ngram_counts([0], 1, 3), "longer than order=1"),
        (lambda: er.construct_unique_continuation(5, 6, 2, 0), "k: 6 is out of range"),
        (lambda: er.construct_unique_continuation(1, 1, 2, 0), "V: 1 is out of range"),
        (lambda: er.construct_unique_continuation(5, 2, 0, 0), "D: 0 is out of range"),
        (lambda: er.sample_batch(np.ones((2, 2)), 5, 0), "tokens: 5 is out of range"),
        (lambda: er.prediction_error_submatrix(np.array([[0.5, 0.6]]), [0]), "P: row 0 sums to 1.1"),
        (lambda: er.prediction_error_submatrix(np.array([[0.5, 0.5]]), [0, 1]), "tokens: 2 tokens for 1 rows"),
        (lambda: er.prediction_error_submatrix(np.array([[0.5, 0.5]]), [2]), "tokens: ids must lie in [0, 2), got 2"),
        (lambda: er.prediction_error_submatrix(np.full((2, 2), 0.5), [1, 1]), "tokens: must be distinct ids in [0, 2)"),
        (lambda: er.row_shift(np.ones((3, 3)), np.ones(2)), "shifts: shape (2,) does not match"),
        (lambda: er.log_softmax(np.array([[np.inf, 0.0]])), "A: expected a finite 2-D array"),
        (lambda: er.construct_low_rank_integers(3, 3, 4, 0), "rank: 4 is out of range"),
    ],
)
def test_bad_input_is_refused_with_a_named_argument(call, message):
    with pytest.raises(InputError) as error:
        call()
    assert message in str(error.value)


def test_sparse_and_dense_counts_are_the_same():
    dense = np.array([[2, 0, 1], [0, 3, 0]])
    assert (er.empirical_distribution(dense) != er.empirical_distribution(sparse.csr_matrix(dense))).nnz == 0


class TestRowShiftIsExactOnIntegers:
    def test_int8_rows_do_not_wrap_around_and_float_rows_stay_float(self):
        shifted = er.row_shift(np.array([[100, -100]], dtype=np.int8), np.array([100], dtype=np.int8))
        assert shifted.tolist() == [[200, 0]]
        shifted = er.row_shift(np.ones((2, 2), dtype=np.float32), np.array([1, 2]))
        assert shifted.dtype == np.float64 and shifted.tolist() == [[2.0, 2.0], [3.0, 3.0]]

    def test_int64_overflow_goes_to_python_ints(self):
        A = np.array([[2**62, -(2**62)], [1, 2]])
        shifted = er.row_shift(A, np.array([2**62, -(2**62)]))
        assert shifted.tolist() == [[2**63, 0], [1 - 2**62, 2 - 2**62]]
        assert exact.exact_rank(shifted)[0] == 2
