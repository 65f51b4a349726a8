"""Tests of theory/error_rank.py and the error-rank claims (the logprob-rank claims: test_logprob_rank.py).

Three routes to a rank are cross-checked: the O(V) dominance certificate, a dense SVD with a
Weyl margin, and exact ranks over the integers (python-flint). Every claim can fail (issue 11):
planted wrong ranks never hold, each mutant is refuted through its measurement, and every bound,
tightened, is refuted by the search. Every quantity meets its reference, and a planted wrong quantity
that lets every claim hold is caught there (issue 26).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import flint
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sparse
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from reference_check import disagreements, quantity_disagreements

from rankwall.checks import exact
from rankwall.checks.claims import error_rank as claims
from rankwall.checks.companion.data import characters, read_corpus
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.quantities import Base, declare
from rankwall.checks.engine.verdict import REGISTRY, Case, Certification, OutsideDomain, Status
from rankwall.checks.run.runner import check_in_domain, plan, verify
from rankwall.checks.run.search import search
from rankwall.theory import error_rank as er
from rankwall.theory.validation import InputError

NUMPY = resolve("numpy")
FAMILY = [c for c in REGISTRY if c.id.startswith("error-rank.")]
U = 2.0**-53


class TestUniqueContinuationsForceRank:
    """Prop. A.5: the error matrix of any positive P has rank at least min(k, V - 1)."""

    @pytest.mark.parametrize(("V", "k"), [(5, 1), (5, 4), (5, 5), (40, 17), (64, 63), (64, 64)])
    def test_certificate_dense_svd_and_exact_agree(self, V, k):
        """Routes 1 (dominance or positivity), 3 (SVD + Weyl) and 2 (exact, on P̂) give min(k, V - 1)."""
        logits, tokens = er.construct_unique_continuation(V, k, 3, seed=V + k)
        bounds = claims.float_bounds(logits, tokens)
        route_1 = bounds.certificate.get("dominance", bounds.certificate.get("positivity"))
        assert bounds.lo == bounds.hi == route_1 == min(k, V - 1)
        assert claims.dense_rank_lower(logits, tokens)[0] == min(k, V - 1)
        rational = claims.float_rows_bounds(logits, tokens)
        assert rational.exact and rational.lo == rational.hi == min(k, V - 1)

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


def square_integer_matrices() -> st.SearchStrategy[np.ndarray]:
    """Square integer matrices of order 1 to 9, mostly zeros (so that they are often reducible)."""
    entries = st.sampled_from([0, 0, 0, 0, 1, -1, 2, -3])
    return st.integers(1, 9).flatmap(lambda n: hnp.arrays(np.int64, (n, n), elements=entries))


class TestBlockTriangularRank:
    """checks.exact.block_triangular_rank, the exact route of the pattern ranks at any order, against the
    dense fraction-free rank over the rationals (claims.rational_rank, the slow and obvious reference)."""

    @settings(max_examples=400, deadline=None)
    @given(square_integer_matrices())
    def test_the_ends_enclose_the_rank_and_a_point_is_the_rank(self, M):
        lower, upper, _ = exact.block_triangular_rank(sparse.csr_array(M))
        assert lower <= claims.rational_rank(M.tolist()) <= upper

    def test_an_interval_is_left_open_where_the_form_cannot_close_it(self):
        """[[0, 1], [0, 0]]: two one-state components with zero diagonals, the first left by a nonzero, so
        the ends are 0 and 1; the rank is 1."""
        assert exact.block_triangular_rank(np.array([[0, 1], [0, 0]]))[:2] == (0, 1)

    @pytest.mark.parametrize("recurrent", [0, 7, 30])
    @pytest.mark.parametrize("closed", [1, 3, 7])
    def test_every_pattern_is_pinned(self, closed, recurrent):
        """Transient states form a chain-free order whose diagonal totals are positive, so every component
        that a nonzero leaves is nonsingular, and the two ends meet at the rank."""
        for seed in range(4):
            weights = er.construct_stochastic_with_classes(30, closed, seed, recurrent=recurrent)
            M = claims.with_totals(weights)
            lower, upper, _ = exact.block_triangular_rank(M)
            assert lower == upper == claims.rational_rank(M.toarray().tolist())

    def test_a_block_beyond_the_dense_limit_is_bounded_and_said(self, monkeypatch):
        monkeypatch.setattr(exact, "DENSE_BLOCK_ORDER", 4)
        weights = er.construct_stochastic_with_classes(40, 1, 0, density=0.0, recurrent=10)
        lower, upper, how = exact.block_triangular_rank(claims.with_totals(weights))
        assert lower == 30 and upper == 40 and "1 blocks beyond 4 states left unranked" in how


class TestWhatAnAdversaryTried:
    """Inputs an adversarial review of the sparse route found mishandled (issue 29), each now exact or
    refused by name."""

    def test_dominance_is_exact_for_integers_near_the_int64_limit(self):
        a = 2**62  # the rows' magnitudes sum past 2^63: int64 sums would wrap
        singular = np.array([[1, 1, a, a], [1, 1, a, a], [a, a, 1, 1], [a, a, 1, 1]], dtype=np.int64)
        assert not er.is_weakly_chained_diagonally_dominant(singular)
        assert er.is_weakly_chained_diagonally_dominant(np.array([[-128, 100], [0, 1]], dtype=np.int8))

    def test_block_ranks_of_empty_wide_and_duplicated_matrices(self):
        assert exact.block_triangular_rank(np.zeros((0, 0), dtype=np.int64))[:2] == (0, 0)
        assert exact.block_triangular_rank(np.array([[2**70, 1], [1, 0]], dtype=object))[:2] == (2, 2)
        for parts in (np.array([128, 128], np.uint8), np.array([-(2**63), -(2**63)])):  # sums 256, -2^64
            stored = sparse.coo_array((parts, ([0, 0], [0, 0])), shape=(1, 1))
            assert exact.block_triangular_rank(stored)[:2] == (1, 1)

    def test_an_entry_stored_in_parts_is_their_sum(self):
        cancelling = sparse.coo_array((np.array([1.0, -1.0, 1.0, 1.0]), ([0, 0, 0, 1], [1, 1, 0, 1])), shape=(2, 2))
        assert er.attracting_components(cancelling) == 2
        with pytest.raises(InputError, match="stochastic: non-finite entry"):
            er.attracting_components(np.array([[np.nan, 1.0], [0.0, 1.0]]))

    def test_a_statement_over_a_quantity_of_another_kind_of_case_is_refused_by_name(self):
        with pytest.raises(InputError, match=r"probe\.mixed: lhs: the quantity 'rank M' reads WcddPattern cases"):
            declare(
                "probe.mixed",
                statement="rank M >= n on stochastic patterns",
                lhs=claims.wcdd_rank,
                relation=">=",
                rhs=claims.order,
                cases=claims.stochastic_patterns,
                register=False,
            )

    def test_a_sparse_pattern_costs_memory_linear_in_its_weights(self):
        cycle = er.construct_stochastic_with_classes(131072, 1, 0, density=0.0, recurrent=131072)
        assert cycle.nnz == 131072 and er.attracting_components(cycle) == 1

    def test_an_undecided_lower_bound_shows_the_lower_end_against_n(self):
        """A closed class of 1,050 states on a bare cycle, beyond the dense block limit: rank M is only
        known to lie in [50, 1100], and the verdict shows lhs = 50 (the lower end), rhs = n."""
        verdict = REGISTRY["error-rank.wcdd"].check(
            claims.WcddPattern(n=1100, leaks=1, recurrent=1050, density=0.0), NUMPY
        )
        assert verdict.status is Status.INCONCLUSIVE
        assert (verdict.lhs, verdict.rhs) == (50.0, 1100.0)


def wcdd_by_hand(rows: list[list[int]]) -> bool:
    """Weak chained diagonal dominance the slow way: Python integers for the dominance, and a search
    along nonzero off-diagonal entries from each row to a strictly dominant one."""
    n = len(rows)
    off = [sum(abs(x) for j, x in enumerate(row) if j != i) for i, row in enumerate(rows)]
    if any(abs(rows[i][i]) < off[i] for i in range(n)):
        return False
    strict = {i for i in range(n) if abs(rows[i][i]) > off[i]}
    for start in range(n):
        seen, frontier = {start}, [start]
        while frontier and not seen & strict:
            i = frontier.pop()
            for j in range(n):
                if j != i and rows[i][j] != 0 and j not in seen:
                    seen.add(j)
                    frontier.append(j)
        if not seen & strict:
            return False
    return True


class TestTheGraphTestsMeetTheirReferences:
    """The SciPy-based graph tests of the sparse route against the slow ones at small size."""

    @settings(max_examples=300, deadline=None)
    @given(square_integer_matrices())
    def test_weak_chained_dominance(self, M):
        dominant = M + np.diag(np.abs(M).sum(axis=1) * (np.arange(len(M)) % 2))  # some rows made dominant
        for matrix in (M, dominant):
            expected = wcdd_by_hand(matrix.tolist())
            assert er.is_weakly_chained_diagonally_dominant(matrix) == expected
            assert er.is_weakly_chained_diagonally_dominant(sparse.csr_array(matrix)) == expected

    @settings(max_examples=300, deadline=None)
    @given(square_integer_matrices())
    def test_attracting_components(self, M):
        weights = np.abs(M)
        assert er.attracting_components(weights) == nx.number_attracting_components(er.positive_graph(weights))


class TestSparsePatterns:
    """Patterns with ``recurrent`` given: SciPy CSR weights of any order, with the classes asked."""

    @pytest.mark.parametrize(
        ("n", "closed", "recurrent", "density"), [(50, 1, 10, 0.3), (50, 5, 50, 0.0), (200, 20, 100, 0.2)]
    )
    def test_the_classes_are_those_asked(self, n, closed, recurrent, density):
        weights = er.construct_stochastic_with_classes(n, closed, 3, density=density, recurrent=recurrent)
        assert sparse.issparse(weights) and weights.shape == (n, n) and weights.min() >= 0
        labels, closed_components = er.graph_components(weights)
        assert closed_components.sum() == closed and closed_components[labels].sum() == recurrent
        assert np.all(np.asarray(weights.sum(axis=1)).ravel() > 0)
        case = claims.StochasticPattern(n=n, closed=closed, seed=3, density=density, recurrent=recurrent)
        assert claims.reference_attracting_classes(claims.Context(case, NUMPY)) == closed

    def test_the_dense_and_sparse_wcdd_tests_agree(self):
        for seed in range(6):
            M = claims.wcdd_matrix(claims.WcddPattern(n=40, leaks=seed % 3, seed=seed, recurrent=12))
            assert (
                er.is_weakly_chained_diagonally_dominant(M)
                == er.is_weakly_chained_diagonally_dominant(M.toarray())
                == (seed % 3 > 0)
            )


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
        (lambda: er.log_softmax(np.array([[np.inf, 0.0]])), "z: non-finite value inf at index (0, 0)"),
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


# --------------------------------------------------------------------------- every claim can fail (issue 11)

BOUNDS = {
    "error-rank.unique-continuation": "lower",
    "error-rank.mini-batch": "lower",
    "error-rank.mini-batch-limit": "lower",
    "error-rank.wcdd": "lower",
}


def witness(claim_id: str, V: int = 16) -> Case:
    return REGISTRY[claim_id].witnesses(V)[-1]


class TestEveryClaimNamesItsBound:
    """--tighten needs a direction: a lower bound is raised, an upper bound lowered."""

    def test_directions(self):
        identities = {"error-rank.attracting-components": None, "error-rank.mini-batch-signs": None}
        assert {c.id: c.direction for c in FAMILY} == {**BOUNDS, **identities}

    def test_unique_continuation_tightened_by_1_0001_is_refuted_by_the_structural_upper_bound(self):
        """Prop. A.5 is sharp: rank(P - Ñ) <= min(k, V - 1) because (P - Ñ)1 = 0."""
        instance = claims.UniqueContinuation(V=64, k=64, D=8, seed=0, scale=1.0)
        verdict = REGISTRY["error-rank.unique-continuation"].check(instance, NUMPY, Fraction("1.0001"))
        assert verdict.status is Status.VIOLATED and verdict.method.endswith("upper < 64")
        assert (verdict.lhs, verdict.rhs) == (63, 64)  # as written: rank(P − Ñ) >= the tightened bound
        assert verdict.certified_by is Certification.TWO_SIDED  # pinned: dominance from below, structure from above


def moved(route, offset: int):
    """A quantity's route that reports its enclosure moved by ``offset``."""

    def planted(ctx):
        bounds = route(ctx)
        return claims.RankInterval(bounds.lo + offset, bounds.hi + offset, "planted", "planted", bounds.exact, {})

    return planted


def widened(route, offset: int):
    """A quantity's route that reports an interval straddling its value (``offset`` < 0), or ends that
    contradict each other (``offset`` > 0)."""

    def planted(ctx):
        bounds = route(ctx)
        lo, hi = (bounds.lo - 1, bounds.hi + 1) if offset < 0 else (bounds.hi + 1, bounds.lo)
        return claims.RankInterval(max(lo, 0), hi, "planted", "planted", False, {})

    return planted


PLANTED = {  # claim: (the quantity that is its left side, the direction that makes it false)
    "error-rank.unique-continuation": (claims.prediction_error_rank, -1),
    "error-rank.mini-batch": (claims.batch_error_rank, -1),
    "error-rank.mini-batch-limit": (claims.limit_block_rank, -1),
    "error-rank.mini-batch-signs": (claims.sign_flips, 1),
    "error-rank.wcdd": (claims.wcdd_rank, -1),
    "error-rank.attracting-components": (claims.defect_rank, -1),
}


def plant(monkeypatch, quantity, wrap, offset: int) -> None:
    """Both routes of a quantity (the float measure and the exact one) report the planted value."""
    for route in ("measure_fn", "exact_fn"):
        monkeypatch.setattr(quantity, route, wrap(getattr(quantity, route), offset))


class TestPlantedWrongRanksNeverHold:
    """A rank moved to the wrong side of the bound is violated; an interval that straddles the bound,
    or ends that contradict each other, are inconclusive. Neither ever holds."""

    @pytest.mark.parametrize("claim_id", sorted(PLANTED))
    def test_a_wrong_rank_is_violated(self, claim_id, monkeypatch):
        plant(monkeypatch, *PLANTED[claim_id][:1], moved, PLANTED[claim_id][1])
        verdict = REGISTRY[claim_id].check(witness(claim_id), NUMPY)
        assert verdict.status is Status.VIOLATED, verdict.to_json()
        assert verdict.certified_by is not None

    @pytest.mark.parametrize("claim_id", sorted(PLANTED))
    def test_a_straddling_or_contradicting_interval_is_inconclusive(self, claim_id, monkeypatch):
        plant(monkeypatch, *PLANTED[claim_id][:1], widened, PLANTED[claim_id][1])
        verdict = REGISTRY[claim_id].check(witness(claim_id), NUMPY)
        assert verdict.status is Status.INCONCLUSIVE, verdict.to_json()

    @pytest.mark.parametrize("claim_id", ["error-rank.wcdd", "error-rank.attracting-components"])
    def test_an_exact_rank_one_too_low_is_violated(self, claim_id, monkeypatch):
        """Both sides are exact here, so a planted rank is refuted on every witness."""
        block_triangular_rank = exact.block_triangular_rank

        def one_too_low(M):
            lower, upper, _ = block_triangular_rank(M)
            return lower - 1, upper - 1, "planted"

        monkeypatch.setattr(exact, "block_triangular_rank", one_too_low)
        verdicts = [REGISTRY[claim_id].check(i, NUMPY) for i in REGISTRY[claim_id].witnesses(16)]
        assert {v.status for v in verdicts} == {Status.VIOLATED}
        assert {v.certified_by for v in verdicts} == {Certification.EXACT}


class TestTheExactRouteReadsTheBackendsInstance:
    """Issue 26: every quantity of a context certifies one object. On float32 the factors are rounded, and
    the exact route evaluates P = softmax(HWᵀ) of those rounded factors, never the float64 draw."""

    def test_float32_factors_are_what_the_exact_route_reads(self):
        float32 = resolve("array-api-strict", "no_float64", "float32")
        case = claims.UniqueContinuation(V=40, k=20, D=4, seed=1, scale=3.0)
        ctx = claims.Context(case, float32)
        drawn, _ = claims.unique_instance(case)
        read, _ = claims.exact_factors(ctx)
        assert np.array_equal(read.H, drawn.H.astype(np.float32).astype(np.float64))
        assert not np.array_equal(read.H, drawn.H)  # the float64 draw is another instance
        exact_bounds = claims.prediction_error_rank.exact(ctx)
        assert exact_bounds.pinned and exact_bounds.lo == 20
        assert REGISTRY["error-rank.unique-continuation"].check(case, float32).status is Status.HOLDS

    def test_underflowed_margins_are_certified_in_balls(self):
        """Scale 1000 underflows the float margins (route 1 fails in float64); the SVD misses one
        direction; the exact route certifies every margin positive at 256 bits."""
        instance = claims.UniqueContinuation(V=40, k=20, D=1, seed=3, scale=1000.0)
        floats = claims.float_bounds(*claims.unique_instance(instance))
        assert floats.certificate["dominance"] == 0 and floats.lo < floats.hi == 20
        verdict = REGISTRY["error-rank.unique-continuation"].check(instance, NUMPY)
        assert verdict.status is Status.HOLDS and verdict.method.startswith("rank in [20, 20]: lower from interval-256")
        assert verdict.certified_by is Certification.TWO_SIDED


class TestMiniBatchHypothesisAndConclusions:
    """Prop. A.7 (issue 30, item 14): the rank (ii) needs no closeness to Ñ, and is checked far from
    convergence too; the signs (i) and the limit (iii) need it, as hypotheses of claims of their own."""

    FAR = claims.MiniBatch(V=8, contexts=20, seed=0, unique_share=0.0, batch_tokens=10, delta=0.9)

    def test_the_rank_holds_far_from_convergence(self):
        """The case outside the sign claim's domain is an instance of the rank claim, and it holds."""
        verdict = REGISTRY["error-rank.mini-batch"].check(self.FAR, NUMPY)
        nu, largest = claims.closeness_radius(self.FAR)
        assert largest >= nu and verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT
        far = [c for c in REGISTRY["error-rank.mini-batch"].witnesses(1024) if c.delta >= 0.25]
        assert far and all(REGISTRY["error-rank.mini-batch"].check(c, NUMPY).status is Status.HOLDS for c in far)
        assert {c.delta for c in far} == {0.9, 1.0}

    @pytest.mark.parametrize(
        ("claim_id", "case", "message"),
        [
            ("error-rank.mini-batch-signs", FAR, r"max\|P − Ñ\| = .* >= ν_B = .* \(not close to convergence\)"),
            ("error-rank.mini-batch", dataclasses.replace(FAR, delta=0.0), r"δ = 0.0 leaves P"),
            ("error-rank.mini-batch-limit", claims.MiniBatch(V=3, contexts=60, batch_tokens=40), r"not weakly chained"),
        ],
    )
    def test_outside_the_hypothesis_is_not_an_instance(self, claim_id, case, message):
        with pytest.raises(OutsideDomain, match=message):
            REGISTRY[claim_id].check(case, NUMPY)
        assert check_in_domain(REGISTRY[claim_id], case, NUMPY) is None

    def test_the_rank_is_measured_exactly(self):
        instance = witness("error-rank.mini-batch", 64)
        verdict = REGISTRY["error-rank.mini-batch"].check(instance, NUMPY)
        parts = claims.batch_rows(instance)
        k, V = parts.error.shape
        assert verdict.status is Status.HOLDS and verdict.certified_by is Certification.EXACT
        assert verdict.lhs == exact.exact_rank(parts.error)[0] == min(k, V - 1) == verdict.rhs

    def test_a_flipped_sign_is_a_violation(self, monkeypatch):
        batch_rows = claims.batch_rows

        def flipped(instance):
            parts = batch_rows(instance)
            c, v = np.argwhere(parts.support & (parts.limit > 0))[0]
            parts.error[c, v] = -parts.error[c, v]
            return parts

        monkeypatch.setattr(claims, "batch_rows", flipped)
        verdict = REGISTRY["error-rank.mini-batch-signs"].check(witness("error-rank.mini-batch-signs"), NUMPY)
        assert verdict.status is Status.VIOLATED and verdict.certified_by is Certification.EXACT
        assert verdict.certificate["first_flip"] and verdict.lhs == 1

    def test_a_singular_block_is_a_violation(self, monkeypatch):
        """(iii): plant a rank one short on the square block (and only there)."""
        exact_rank = exact.exact_rank
        monkeypatch.setattr(exact, "exact_rank", lambda M: (exact_rank(M)[0] - (M.shape[0] == M.shape[1]), "planted"))
        claim = REGISTRY["error-rank.mini-batch-limit"]
        verdicts = [claim.check(i, NUMPY) for i in claim.witnesses(64)]
        assert verdicts and all(v.status is Status.VIOLATED for v in verdicts)

    def test_the_weyl_hypothesis_is_exact(self):
        """‖E‖_F²‖L⁻¹‖_F² is a rational below 1 on every witness, and grows with δ: far from convergence
        the Weyl step is out of reach and the case is outside the limit claim."""
        case = REGISTRY["error-rank.mini-batch-limit"].witnesses(64)[0]
        chained, product = claims.limit_certificate(case)
        assert chained and isinstance(product, Fraction) and 0 < product < 1
        far = dataclasses.replace(case, delta=0.9)
        assert claims.limit_certificate(far)[1] > product and claims.limit_hypothesis(far) is not None


class TestMutantsAreRefutedThroughTheirMeasurement:
    """Each planted false variant is refuted by what is measured, not by a hard-coded answer."""

    @pytest.mark.parametrize("mutant", [m for c in FAMILY for m in c.mutants.values()], ids=lambda m: m.id)
    def test_refuted_on_a_witness(self, mutant):
        """Refuted on a witness, and every decided verdict names what certifies it."""
        verdicts = [mutant.check(i, NUMPY) for i in mutant.witnesses(16)]
        assert any(v.status is Status.VIOLATED for v in verdicts), f"{mutant.id} survived every witness"
        assert all(v.certified_by is not None for v in verdicts if v.status is not Status.INCONCLUSIVE)

    def test_float_rows_lose_rank_to_underflow(self):
        """The doc's example: float64 rows of scale 1e4 have two attracting classes, rank V - 2."""
        mutant = REGISTRY["error-rank.unique-continuation"].mutants["float-rows"]
        verdict = mutant.check(mutant.witnesses(16)[0], NUMPY)
        assert verdict.status is Status.VIOLATED and (verdict.lhs, verdict.rhs) == (4, 5)
        assert verdict.certified_by is Certification.EXACT and verdict.certificate["zeros_in_float_P"] == 27

    def test_weak_dominance_leaves_the_kernel_vector_one(self):
        mutant = REGISTRY["error-rank.wcdd"].mutants["weak-dominance-suffices"]
        for instance in mutant.witnesses(16):
            verdict = mutant.check(instance, NUMPY)
            assert verdict.status is Status.VIOLATED and verdict.lhs == instance.n - 1

    def test_without_the_chain_the_block_of_every_token_is_singular(self):
        mutant = REGISTRY["error-rank.mini-batch-limit"].mutants["no-chain-condition"]
        for instance in mutant.witnesses(16):
            verdict = mutant.check(instance, NUMPY)
            assert verdict.status is Status.VIOLATED and verdict.lhs == instance.V - 1 == verdict.rhs - 1


# --------------------------------------------------------------------------- checked measurements (issues 18, 26)


def witnesses_at(claim, sizes=(2, 3, 16)) -> list[Case]:
    return list(dict.fromkeys(case for V in sizes for case in claim.witnesses(V)))


#: Every quantity the family exports, with the claim whose cases it reads.
QUANTITIES = [
    (claims.prediction_error_rank, "error-rank.unique-continuation"),
    (claims.unique_tokens, "error-rank.unique-continuation"),
    (claims.vocabulary, "error-rank.unique-continuation"),
    (claims.float_rows_error_rank, "error-rank.unique-continuation[float-rows]"),
    (claims.defect_rank, "error-rank.attracting-components"),
    (claims.order, "error-rank.attracting-components"),
    (claims.attracting_classes, "error-rank.attracting-components"),
    (claims.strong_components, "error-rank.attracting-components"),
    (claims.wcdd_rank, "error-rank.wcdd"),
    (claims.no_leak_rank, "error-rank.wcdd[weak-dominance-suffices]"),
    (claims.order, "error-rank.wcdd"),
    (claims.batch_error_rank, "error-rank.mini-batch"),
    (claims.batch_unique_contexts, "error-rank.mini-batch"),
    (claims.vocabulary, "error-rank.mini-batch"),
    (claims.sign_flips, "error-rank.mini-batch-signs"),
    (claims.sign_flips_everywhere, "error-rank.mini-batch-signs"),
    (claims.limit_block_rank, "error-rank.mini-batch-limit"),
]


class TestEveryQuantityMeetsItsReference:
    """Issue 26: each exported quantity's float measure and exact value enclose its reference (the slow
    way, sharing no code with them) on the witnesses at V = 16 (the corpus contexts aside: V = 65; the claims'
    sides at V = 2, 3, 16 and 64 are tests/test_references.py's)."""

    def test_every_quantity_is_exported_and_listed(self):
        exported = [getattr(claims, name) for name in claims.__all__]
        bases = {id(q) for q in exported if isinstance(q, Base)}
        assert bases == {id(q) for q, _ in QUANTITIES}

    @pytest.mark.parametrize(("quantity", "claim_id"), QUANTITIES, ids=lambda x: str(x))
    def test_measure_and_exact_value_enclose_the_reference(self, quantity, claim_id):
        cases = [c for c in REGISTRY[claim_id].witnesses(16) if (c.vocabulary or 65) <= 16]
        assert cases and not quantity_disagreements(quantity, cases, NUMPY)

    @pytest.mark.parametrize(
        ("quantity", "claim_id"), [q for q in QUANTITIES if q[1].startswith(("error-rank.attr", "error-rank.wcdd"))]
    )
    def test_the_sparse_patterns_meet_the_reference_too(self, quantity, claim_id):
        """The witnesses at n = V (sparse weights, the block triangular route) built at n = 64."""
        cases = [c for c in REGISTRY[claim_id].witnesses(64) if c.recurrent]
        assert cases and not quantity_disagreements(quantity, cases, NUMPY)


class TestAPlantedWrongQuantityIsCaughtByItsReference:
    """One planted wrong quantity: computed as the wrong thing, it lets every claim hold on every witness
    (so "the verdict holds on the witnesses" cannot see it), but its reference, computed the slow way on the
    same instance, disagrees; the quantity as shipped agrees on the same cases."""

    def test_the_rows_for_the_rank(self, monkeypatch):
        """rank(P − Ñ) taken as min(k, V), the number of rows, as if (P − Ñ)1 = 0 did not hold."""
        claim = REGISTRY["error-rank.unique-continuation"]
        cases = [c for c in witnesses_at(claim, sizes=(2, 3, 8)) if isinstance(c, claims.UniqueContinuation)]

        def rows(ctx):
            k, V = claims._unique_counts(ctx)
            return claims.pinned(min(k, V), "planted: the rows")

        assert not quantity_disagreements(claims.prediction_error_rank, cases, NUMPY)
        for route in ("measure_fn", "exact_fn"):
            monkeypatch.setattr(claims.prediction_error_rank, route, rows)
        assert {claim.check(case, NUMPY).status for case in cases} == {Status.HOLDS}
        found = quantity_disagreements(claims.prediction_error_rank, cases, NUMPY)
        assert found and all("outside the measured" in why for why in found), found
        assert len(found) == sum(c.k == c.V for c in cases)
        assert disagreements(claim, cases, NUMPY)  # the registry's reference test sees it too


class TestReferences:
    """The references compute what their quantities state, on instances whose answer is known."""

    def test_ball_rank_is_the_rank_and_never_above_it(self):
        with exact.precision(128):
            one = [[flint.arb(1), flint.arb(2)], [flint.arb(2), flint.arb(4)]]
            assert claims.ball_rank(one) == 1
            assert claims.ball_rank([[flint.arb(3), flint.arb(0)], [flint.arb(0), flint.arb("1e-30")]]) == 2
            # a ball that contains 0 is never a pivot: a lower bound, not a guess
            assert claims.ball_rank([[flint.arb(1), flint.arb(0)], [flint.arb(0), flint.arb(0, 1e-3)]]) == 1

    def test_unique_continuation_rank_at_k_equals_V_is_V_minus_1(self):
        ctx = claims.Context(claims.UniqueContinuation(V=6, k=6, D=2, seed=0, scale=1.0), NUMPY)
        assert claims.reference_prediction_error_rank(ctx) == 5

    def test_the_corpus_count_is_recounted(self):
        case = claims.CorpusContinuations(order=3)
        assert claims.unique_token_count(case) == len(claims.unique_instance(case)[1]) == 60

    def test_attracting_classes_by_reachability(self):
        ctx = claims.Context(claims.StochasticPattern(n=12, closed=3, seed=1), NUMPY)
        assert (claims.reference_defect_rank(ctx), claims.reference_attracting_classes(ctx)) == (9, 3)
        assert claims.reference_strong_components(ctx) >= 3


class TestClosenessForTheSearch:
    """Every claim holds on its witnesses, each verdict naming what certifies it; every integer bound puts a
    continuous ``closeness`` in its certificate (larger is nearer a violation), at most 0 where it holds."""

    @pytest.mark.parametrize("claim", FAMILY, ids=lambda c: c.id)
    def test_at_most_zero_where_the_claim_holds(self, claim):
        """At V = 16, or 64 for the batches (at 16 every batch token is unique, k_B = V, and the mass outside
        T_B is 0 on every witness)."""
        verdicts = [claim.check(case, NUMPY) for case in claim.witnesses(64 if "batch" in claim.id else 16)]
        assert all(v.status is Status.HOLDS and v.certified_by is not None for v in verdicts)
        if claim.direction is None:
            return
        values = [v.certificate["closeness"] for v in verdicts]
        assert all(math.isfinite(x) and x <= 0 for x in values), values
        assert len(set(values)) > 1, "a constant gives the search nothing to climb"

    def test_it_rises_with_the_scale_of_the_logits(self):
        claim = REGISTRY["error-rank.unique-continuation"]
        near = [
            claim.check(claims.UniqueContinuation(V=40, k=20, D=4, seed=1, scale=s), NUMPY).certificate["closeness"]
            for s in (0.1, 3.0, 30.0)
        ]
        assert near == sorted(near) and near[0] < -0.4 < near[-1]


class TestDomainGuards:
    """A hypothesis false on the built values is no instance: OutsideDomain, which search rejects and
    verify counts apart, never a counterexample."""

    def test_verify_counts_the_batches_far_from_convergence_apart_for_the_signs(self):
        """The rank claim's witnesses, far from convergence included, checked by the sign claim: the two
        far ones are outside its domain, counted apart; the rank claim checks all six."""
        signs = dataclasses.replace(REGISTRY["error-rank.mini-batch-signs"], witnesses=claims._batch_witnesses)
        for claim, outside in ((signs, 2), (REGISTRY["error-rank.mini-batch"], 0)):
            (report,) = verify(plan([claim], [64], 0, 0), NUMPY, NUMPY).reports
            assert report.outside_domain == outside and report.counts == {"holds": 6 - outside}


def variant(name: str, statement: str, lhs, relation: str, rhs, cases):
    return declare(
        f"variant.{name}", statement=statement, lhs=lhs, relation=relation, rhs=rhs, cases=cases, register=False
    )


#: False statements of the kind an adversarial review writes, declared from the family's quantities.
FALSE_VARIANTS = {
    v.id: v
    for v in (
        variant(
            "rank-at-least-k",
            "rank(P − Ñ) ≥ k",
            claims.prediction_error_rank,
            ">=",
            claims.unique_tokens,
            claims.unique_continuations,
        ),
    )
}


@pytest.mark.parametrize("claim", FALSE_VARIANTS.values(), ids=lambda c: c.id)
def test_a_false_variant_is_refuted_by_search_and_by_the_witnesses(claim):
    """Each fails only at an edge (k = V): the search finds it within the CI budget, and verify's
    witnesses at V = 16 refute it."""
    result = search(claim, NUMPY, budget=300, seed=0)
    assert result.counterexample is not None and result.counterexample.status is Status.VIOLATED
    verdicts = [claim.check(case, NUMPY) for case in claim.witnesses(16)]
    assert any(v.status is Status.VIOLATED for v in verdicts)
