"""Ranks of log-probabilities: the logprob-rank claims (checks/claims/logprob_rank.py: ER.6, declared over
the family's quantities), and the certified rank of a model's log-probabilities (checks/models/logprob_rank.py),
on float32 forward passes built here: both ends against a 50-digit reference, and the factorization check
failing on heads that are not what it is told."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from reference_check import disagreements, quantity_disagreements

from rankwall.checks import exact
from rankwall.checks.claims import logprob_rank as claims
from rankwall.checks.engine import tolerance
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.quantities import Base, Context, declare
from rankwall.checks.engine.verdict import REGISTRY, Case, Certification, OutsideDomain, RankInterval, Status
from rankwall.checks.models import logprob_rank as lr
from rankwall.checks.run.runner import check_in_domain
from rankwall.checks.run.search import search
from rankwall.theory import error_rank as er
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


# --------------------------------------------------------------------------- the logprob-rank claims (ER.6)

NUMPY = resolve("numpy")
FAMILY = [c for c in REGISTRY if c.id.startswith("logprob-rank.")]
U = 2.0**-53


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


def witness(claim_id: str, V: int = 16) -> Case:
    return REGISTRY[claim_id].witnesses(V)[-1]


class TestEveryClaimNamesItsBound:
    """--tighten needs a direction: each of these is an upper bound, lowered."""

    def test_directions(self):
        assert {c.direction for c in FAMILY} == {"upper"} and len(FAMILY) == 3

    def test_row_shift_tightened_by_0_99_allows_no_change(self):
        """An upper bound b = 1 tightened by F = 0.99 asks |rank difference| <= ⌈0.99⌉ - 1 = 0: a shift
        that adds the direction 1 refutes it, exactly."""
        claim = REGISTRY["logprob-rank.row-shift"]
        verdicts = [claim.check(i, NUMPY, Fraction("0.99")) for i in claim.witnesses(16)]
        gaps = {v.certificate["rank_lower"]: v.status for v in verdicts}
        assert gaps == {0: Status.HOLDS, 1: Status.VIOLATED}
        assert {v.certified_by for v in verdicts} == {Certification.EXACT}


def moved(route, offset: int):
    """A quantity's route that reports its enclosure moved by ``offset``, its certificate kept."""

    def planted(ctx):
        b = route(ctx)
        return RankInterval(b.lo + offset, b.hi + offset, "planted", "planted", b.exact, b.certificate)

    return planted


def widened(route, offset: int):
    """A straddling interval (``offset`` < 0) or contradicting ends (``offset`` > 0)."""

    def planted(ctx):
        b = route(ctx)
        lo, hi = (b.lo - 1, b.hi + 1) if offset < 0 else (b.hi + 1, b.lo)
        return RankInterval(max(lo, 0), hi, "planted", "planted", False, {})

    return planted


PLANTED = {  # claim: (the quantity that is its left side, the direction that makes it false)
    "logprob-rank.log-softmax": (claims.log_softmax_rank, 2),
    "logprob-rank.row-shift": (claims.shift_rank_gap, 2),
    "logprob-rank.bottleneck": (claims.bottleneck_rank, 2),
}


def plant(monkeypatch, quantity, wrap, offset: int) -> None:
    for route in ("measure_fn", "exact_fn"):
        monkeypatch.setattr(quantity, route, wrap(getattr(quantity, route), offset))


class TestPlantedWrongRanksNeverHold:
    """A rank moved past the bound is violated; a straddling interval or contradicting ends are
    inconclusive. Neither ever holds."""

    @pytest.mark.parametrize("claim_id", sorted(PLANTED))
    def test_a_wrong_rank_is_violated(self, claim_id, monkeypatch):
        quantity, offset = PLANTED[claim_id]
        plant(monkeypatch, quantity, moved, offset)
        verdict = REGISTRY[claim_id].check(witness(claim_id), NUMPY)
        assert verdict.status is Status.VIOLATED and verdict.certified_by is not None, verdict.to_json()

    @pytest.mark.parametrize("claim_id", sorted(PLANTED))
    def test_a_straddling_or_contradicting_interval_is_inconclusive(self, claim_id, monkeypatch):
        quantity, offset = PLANTED[claim_id]
        plant(monkeypatch, quantity, widened, offset)
        verdict = REGISTRY[claim_id].check(witness(claim_id), NUMPY)
        assert verdict.status is Status.INCONCLUSIVE, verdict.to_json()

    def test_a_failed_factorization_check_leaves_the_float_route_undecided(self, monkeypatch):
        """A lower bound on the rank never proves 'rank <= b': when the computed L fails its factorization
        check, the float measure trusts neither end and decides nothing; the verdict is then the exact
        route's (the factorization of the exact L, which needs no check, and a minor in balls)."""
        monkeypatch.setattr(claims, "factorization_residual", lambda Z, L: (1.0, 0.0))
        for claim_id in ("logprob-rank.log-softmax", "logprob-rank.bottleneck"):
            case = REGISTRY[claim_id].witnesses(16)[0]
            measured = REGISTRY[claim_id].measure(case, NUMPY, Fraction(1))
            assert "factorization check" in measured.method and measured.certified_by is Certification.ONE_SIDED
            verdict = REGISTRY[claim_id].check(case, NUMPY)
            assert verdict.status is Status.HOLDS and "balls" in verdict.method, verdict.to_json()

    def test_without_a_nonzero_minor_a_mutant_is_not_refuted(self, monkeypatch):
        """The exact route's lower end is a minor certified nonzero in balls; without one (planted), the
        mutant 'rank(log softmax A) <= rank A' is not refuted where the float route is untrusted too."""
        monkeypatch.setattr(claims, "factorization_residual", lambda Z, L: (1.0, 0.0))
        monkeypatch.setattr(claims, "minor_rank", lambda L, rows, upper: (0, "planted: no minor"))
        mutant = REGISTRY["logprob-rank.log-softmax"].mutants["no-extra-rank"]
        statuses = {mutant.check(case, NUMPY).status for case in mutant.witnesses(16)}
        assert Status.INCONCLUSIVE in statuses and Status.VIOLATED not in statuses  # true where 1 ∈ rowspace A

    def test_a_computed_L_off_its_rounding_bound_refutes_nothing(self, monkeypatch):
        """An error in log softmax of rank 2 above the rounding bound: the SVD sees rank(A) + 2, but the
        factorization check fails, so the float route trusts neither end; the exact route, which uses the
        computed L only to choose its minor, certifies rank(A) + 1."""
        log_softmax = er.log_softmax

        def perturbed(A):
            L = log_softmax(A)
            rng = np.random.default_rng(0)
            return L + 1e-6 * rng.standard_normal((L.shape[0], 2)) @ rng.standard_normal((2, L.shape[1]))

        monkeypatch.setattr(claims.er, "log_softmax", perturbed)
        claim = REGISTRY["logprob-rank.log-softmax"]
        instance = claim.witnesses(16)[0]  # rank(A) = 0
        assert claim.measure(instance, NUMPY, Fraction(1)).certificate["weyl_margin"] < 1e-6
        verdict = claim.check(instance, NUMPY)
        assert verdict.status is Status.HOLDS and verdict.certificate["rank_lower"] == 1
        assert verdict.certified_by is Certification.TWO_SIDED and "balls" in verdict.method


class TestTheExactRouteReadsTheBackendsInstance:
    """Issue 26: on float32 the Gaussian factors are rounded; the exact route reads those rounded factors
    (in float64 arithmetic), never the float64 draw, so every quantity of the context has one object."""

    def test_the_float32_factors_are_what_the_exact_route_reads(self, monkeypatch):
        float32 = resolve("array-api-strict", "no_float64", "float32")
        case = claims.Factors(rows=12, columns=20, rank=3, seed=1, scale=3.0)
        seen = []
        exact_rank = claims.exact_log_probability_rank
        monkeypatch.setattr(
            claims,
            "exact_log_probability_rank",
            lambda L, rows, right: seen.append(right) or exact_rank(L, rows, right),
        )
        bounds = claims.bottleneck_rank.exact(Context(case, float32))
        W = claims.factor_matrices(case)[1]
        ones = np.ones((W.shape[0], 1))
        assert np.array_equal(seen[-1], claims.integer_rows(np.hstack([W.astype(np.float32).astype(np.float64), ones])))
        assert not np.array_equal(seen[-1], claims.integer_rows(np.hstack([W, ones])))  # the float64 draw differs
        assert bounds.pinned and bounds.lo == 4 and "balls" in bounds.lower
        assert REGISTRY["logprob-rank.bottleneck"].check(case, float32).status is Status.HOLDS


class TestMutantsAreRefutedThroughTheirMeasurement:
    @pytest.mark.parametrize("mutant", [m for c in FAMILY for m in c.mutants.values()], ids=lambda m: m.id)
    def test_refuted_on_a_witness(self, mutant):
        """Refuted on a witness, and every decided verdict names what certifies it."""
        verdicts = [mutant.check(i, NUMPY) for i in mutant.witnesses(16)]
        assert any(v.status is Status.VIOLATED for v in verdicts), f"{mutant.id} survived every witness"
        assert all(v.certified_by is not None for v in verdicts if v.status is not Status.INCONCLUSIVE)


def witnesses_at(claim, sizes=(2, 16)) -> list[Case]:
    return list(dict.fromkeys(case for V in sizes for case in claim.witnesses(V)))


#: Every quantity the family exports, with the claim whose cases it reads.
QUANTITIES = [
    (claims.log_softmax_rank, "logprob-rank.log-softmax"),
    (claims.logit_rank, "logprob-rank.log-softmax"),
    (claims.logit_rank, "logprob-rank.row-shift"),
    (claims.shifted_rank, "logprob-rank.row-shift"),
    (claims.second_shifted_rank, "logprob-rank.row-shift"),
    (claims.shift_rank_gap, "logprob-rank.row-shift"),
    (claims.bottleneck_rank, "logprob-rank.bottleneck"),
    (claims.hidden_size, "logprob-rank.bottleneck"),
]


class TestEveryQuantityMeetsItsReference:
    """Issue 26: each exported quantity's measure and exact value enclose its reference on the witnesses
    at V = 16 (the claims' sides at V = 2, 3, 16 and 64 are tests/test_references.py's)."""

    def test_every_quantity_is_listed(self):
        exported = [getattr(claims, name) for name in claims.__all__]
        assert {id(q) for q in exported if isinstance(q, Base)} == {id(q) for q, _ in QUANTITIES}

    @pytest.mark.parametrize(("quantity", "claim_id"), QUANTITIES, ids=str)
    def test_measure_and_exact_value_enclose_the_reference(self, quantity, claim_id):
        cases = REGISTRY[claim_id].witnesses(16)
        assert cases and not quantity_disagreements(quantity, cases, NUMPY)


class TestAPlantedWrongQuantityIsCaughtByItsReference:
    """rank(log softmax A) taken as rank A (the normaliser's direction forgotten): every claim still
    holds on every witness, but the reference (the rank of log softmax A in balls) disagrees."""

    def test_the_rank_of_the_logits_for_that_of_the_log_probabilities(self, monkeypatch):
        claim = REGISTRY["logprob-rank.log-softmax"]
        cases = witnesses_at(claim)
        assert not quantity_disagreements(claims.log_softmax_rank, cases, NUMPY)
        for route in ("measure_fn", "exact_fn"):
            monkeypatch.setattr(claims.log_softmax_rank, route, claims.logit_rank.measure_fn)
        assert {claim.check(case, NUMPY).status for case in cases} == {Status.HOLDS}
        found = quantity_disagreements(claims.log_softmax_rank, cases, NUMPY)
        assert len(found) >= len(cases) // 2, found
        assert disagreements(claim, cases, NUMPY)


class TestReferences:
    def test_a_cancelling_shift_lowers_the_rank(self):
        case = claims.RowShift(rows=6, columns=5, rank=3, seed=0, cancelling=True, second=0)
        A, lam, mu = claims.row_shift_instance(case)
        assert exact.exact_rank(A)[0] == 3 and exact.exact_rank(er.row_shift(A, lam))[0] == 2 and not mu.any()
        ctx = Context(case, NUMPY)
        assert (claims.reference_shifted_rank(ctx, 1), claims.reference_shifted_rank(ctx, 2)) == (2, 3)

    def test_log_softmax_of_a_ones_column_matrix_keeps_its_rank(self):
        ctx = Context(claims.LowRank(rows=8, columns=7, rank=3, seed=0, ones_column=True), NUMPY)
        assert claims.reference_log_softmax_rank(ctx) == 3


class TestClosenessForTheSearch:
    """Every bound puts a continuous ``closeness`` in its certificate (larger is nearer a violation)."""

    @pytest.mark.parametrize("claim", FAMILY, ids=lambda c: c.id)
    def test_at_most_zero_where_the_claim_holds(self, claim):
        """Each holds on its witnesses, naming what certifies it, with a closeness at most 0."""
        verdicts = [claim.check(case, NUMPY) for case in claim.witnesses(16)]
        assert all(v.status is Status.HOLDS and v.certified_by is not None for v in verdicts)
        values = [v.certificate["closeness"] for v in verdicts]
        assert all(math.isfinite(x) and x <= 0 for x in values), values
        assert len(set(values)) > 1, "a constant gives the search nothing to climb"

    def test_higher_on_the_cases_the_row_shift_mutant_refutes(self):
        mutant = REGISTRY["logprob-rank.row-shift"].mutants["preserves-rank"]
        verdicts = [mutant.check(case, NUMPY) for case in mutant.witnesses(16)]
        held = [v.certificate["closeness"] for v in verdicts if v.status is Status.HOLDS]
        violated = [v.certificate["closeness"] for v in verdicts if v.status is Status.VIOLATED]
        assert held and violated and min(violated) > max(held)


class TestDomainGuards:
    def test_an_integer_float32_cannot_hold_is_outside_the_domain(self):
        case = claims.LowRank(rows=2, columns=3, rank=1, seed=0, spread=5, scale=10**7 + 1)
        float32 = resolve("array-api-strict", "no_float64", "float32")
        with pytest.raises(OutsideDomain, match="cannot hold exactly"):
            REGISTRY["logprob-rank.log-softmax"].check(case, float32)
        assert check_in_domain(REGISTRY["logprob-rank.log-softmax"], case, float32) is None
        assert REGISTRY["logprob-rank.log-softmax"].check(case, NUMPY).status is Status.HOLDS


def variant(name: str, statement: str, lhs, relation: str, rhs, cases):
    return declare(
        f"variant.{name}", statement=statement, lhs=lhs, relation=relation, rhs=rhs, cases=cases, register=False
    )


#: False statements of the kind an adversarial review writes, declared from the family's quantities.
FALSE_VARIANTS = {
    v.id: v
    for v in (
        variant(
            "shift-never-lowers-rank",
            "rank(A + λ1ᵀ) ≥ rank A",
            claims.shifted_rank,
            ">=",
            claims.logit_rank,
            claims.row_shifts,
        ),
        variant(
            "normaliser-always-adds",
            "rank(log softmax A) ≥ rank A + 1",
            claims.log_softmax_rank,
            ">=",
            claims.logit_rank + 1,
            claims.low_rank_matrices,
        ),
        variant(
            "bottleneck-attained",
            "rank(log softmax(HWᵀ)) ≥ d + 1",
            claims.bottleneck_rank,
            ">=",
            claims.hidden_size + 1,
            claims.factors,
        ),
    )
}


@pytest.mark.parametrize("claim", FALSE_VARIANTS.values(), ids=lambda c: c.id)
def test_a_false_variant_is_refuted_by_search_and_by_the_witnesses(claim):
    """Each fails only at an edge (a cancelling shift, 1 in the row space or a full-rank A, d >= the
    shape): the search finds it within the CI budget, and verify's witnesses at V = 16 refute it."""
    result = search(claim, NUMPY, budget=300, seed=0)
    assert result.counterexample is not None and result.counterexample.status is Status.VIOLATED
    verdicts = [claim.check(case, NUMPY) for case in claim.witnesses(16)]
    assert any(v.status is Status.VIOLATED for v in verdicts)
