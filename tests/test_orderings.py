"""Top-k orderings (theory/orderings.py, checks/models/orderings.py, ``rankwall orderings``): planted heads whose
unreachable orderings are known by construction, an independent angular sweep in the plane, every
certificate re-checked here in Fractions, invariance under scaling and translation, and the CLI."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from rankwall.checks.cli import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE, main
from rankwall.checks.models import orderings as runner
from rankwall.theory import expressivity as ex
from rankwall.theory import orderings as od
from rankwall.theory.validation import InputError

SQUARE = np.array([[1, 0], [0, 1], [-1, 0], [0, -1], [0, 0]], dtype=float)  # vertices in turn, then the centre
OCTAHEDRON = np.vstack([np.eye(3), -np.eye(3), np.zeros((1, 3))])  # +e_i, -e_i, the centre


def exact_logits(W, b, h):
    h = [Fraction(float(x)) for x in h]
    b = np.zeros(len(W)) if b is None else b
    return [
        sum((Fraction(float(w)) * x for w, x in zip(row, h, strict=True)), Fraction(float(c)))
        for row, c in zip(W, b, strict=True)
    ]


def realised_exactly(W, b, h, ordering):
    """The ordering is the strict top k of W h + b, in Fractions."""
    z = exact_logits(W, b, h)
    chain = all(z[p] > z[q] for p, q in itertools.pairwise(ordering))
    return chain and all(z[ordering[-1]] > z[j] for j in range(len(W)) if j not in ordering)


def infeasible_exactly(W, b, pairs, weights, region=None):
    """Weights >= 0 summing to 1 with sigma(sum y (w_p - w_q)) + sum y (b_p - b_q) <= 0, in Fractions."""
    b = np.zeros(len(W)) if b is None else b
    if any(w < 0 for w in weights) or sum(weights) != 1:
        return False
    v = [
        sum(w * (Fraction(float(W[p][i])) - Fraction(float(W[q][i]))) for w, (p, q) in zip(weights, pairs, strict=True))
        for i in range(W.shape[1])
    ]
    offset = sum(w * (Fraction(float(b[p])) - Fraction(float(b[q]))) for w, (p, q) in zip(weights, pairs, strict=True))
    if region is None:
        return all(x == 0 for x in v) and offset <= 0
    if isinstance(region, od.Box):
        radii = region.of_dimension(W.shape[1])
        return sum(Fraction(float(r)) * abs(x) for r, x in zip(radii, v, strict=True)) + offset <= 0
    return offset <= 0 and Fraction(region.radius) ** 2 * sum(x * x for x in v) <= offset**2


def assert_certified(W, b, decisions, region=None):
    """Every answer's certificate, re-checked here independently of the module."""
    for d in decisions:
        if d.status == od.REALISABLE:
            assert realised_exactly(W, b, d.witness, d.ordering), d
            assert od.inside(region, d.witness)
            if isinstance(region, od.Ball):
                assert float(np.linalg.norm(d.witness)) <= region.radius * (1 + 1e-12)
        elif d.status == od.UNREALISABLE:
            assert infeasible_exactly(W, b, d.pairs, d.weights, region), d


def decide_all(W, k, b=None, region=None):
    orderings = list(itertools.permutations(range(len(W)), k))
    return {d.ordering: d for d in od.top_k_orderings(W, orderings, b, region=region)}


class TestPlantedHeads:
    """The square's top 2 are neighbours and its centre (z = 0 between two positive and two negative
    vertices) is always third; the octahedron's top 3 take one vertex per axis, its centre fourth."""

    @pytest.mark.parametrize("k", [1, 2, 3])
    def test_the_square(self, k):
        decisions = decide_all(SQUARE, k)
        neighbours = {(i, (i + s) % 4) for i in range(4) for s in (1, -1)}
        expected = {1: {(i,) for i in range(4)}, 2: neighbours, 3: {(i, j, 4) for i, j in neighbours}}[k]
        assert {o for o, d in decisions.items() if d.status == od.REALISABLE} == expected
        assert {o for o, d in decisions.items() if d.status == od.UNREALISABLE} == set(decisions) - expected
        assert_certified(SQUARE, None, decisions.values())

    @pytest.mark.parametrize("k", [2, 3])
    def test_the_octahedron(self, k):
        decisions = decide_all(OCTAHEDRON, k)
        axis = lambda t: t % 3  # noqa: E731
        expected = {o for o in decisions if 6 not in o and len({axis(t) for t in o}) == k}
        assert {o for o, d in decisions.items() if d.status == od.REALISABLE} == expected
        assert all(d.status == od.UNREALISABLE for o, d in decisions.items() if o not in expected)
        assert len(expected) == {2: 24, 3: 48}[k]
        assert_certified(OCTAHEDRON, None, decisions.values())

    def test_twins_tie_so_no_ordering_separates_them(self):
        """Row 3 repeats row 0: any ordering holding one of them, or both, forces a tie (certificate:
        the pair itself, or the chain through the other token)."""
        W = np.vstack([SQUARE[:4], SQUARE[:1]])
        decisions = decide_all(W, 2)
        for ordering, d in decisions.items():
            expected = od.UNREALISABLE if {0, 4} & set(ordering) else d.status
            assert d.status == expected, ordering
        assert_certified(W, None, decisions.values())


def angular_sweep(W, k):
    """Every top-k ordering of a 2-D head without bias, from the arcs of directions between the angles
    where two logits tie (the ordering is constant on each arc): the top k at each arc's midpoint, kept
    when it is strict there (checked in Fractions)."""
    angles = []
    for p, q in itertools.combinations(range(len(W)), 2):
        d = W[p] - W[q]
        base = math.atan2(d[1], d[0]) + math.pi / 2
        angles += [base % (2 * math.pi), (base + math.pi) % (2 * math.pi)]
    angles = sorted(angles)
    found = set()
    for a, b in zip(angles, [*angles[1:], angles[0] + 2 * math.pi], strict=True):
        h = np.array([math.cos((a + b) / 2), math.sin((a + b) / 2)])
        z = exact_logits(W, None, h)
        order = sorted(range(len(W)), key=lambda t: -z[t])
        if len(set(z[t] for t in order[: k + 1])) == k + 1:
            found.add(tuple(order[:k]))
    return found


@pytest.mark.parametrize(("seed", "k"), [(0, 2), (1, 2), (2, 3), (3, 3)])
def test_the_plane_agrees_with_an_angular_sweep(seed, k):
    W = np.random.default_rng(seed).standard_normal((9 if k == 2 else 7, 2))
    decisions = decide_all(W, k)
    assert {o for o, d in decisions.items() if d.status == od.REALISABLE} == angular_sweep(W, k)
    assert all(d.status != od.UNDECIDED for d in decisions.values())
    assert_certified(W, None, decisions.values())


@pytest.mark.parametrize(
    ("V", "D", "k", "bias"), [(12, 2, 2, True), (12, 3, 3, True), (40, 4, 2, False), (40, 6, 3, True)]
)
def test_random_heads_every_answer_certified_and_no_sampled_h_contradicts(V, D, k, bias):
    """Each answer's certificate holds in Fractions, and the top k of 300 random hidden states are
    all decided realisable (an unrealisable certificate they contradicted would be wrong)."""
    rng = np.random.default_rng(V * D + k)
    W = rng.standard_normal((V, D))
    b = rng.standard_normal(V) if bias else None
    sampled = set()
    for h in rng.standard_normal((300, D)) * rng.choice([0.3, 1, 3, 10], size=(300, 1)):
        z = W @ h + (0 if b is None else b)
        sampled.add(tuple(int(t) for t in np.argsort(-z)[:k]))
    orderings = sorted(sampled) + [tuple(int(t) for t in rng.choice(V, k, replace=False)) for _ in range(40)]
    decisions = od.top_k_orderings(W, orderings, b)
    by_ordering = {d.ordering: d for d in decisions}
    assert all(by_ordering[o].status == od.REALISABLE for o in sampled)
    assert all(d.status != od.UNDECIDED for d in decisions)
    assert_certified(W, b, decisions)


def test_one_token_orderings_are_the_argmax_question():
    W = np.random.default_rng(4).standard_normal((60, 3))
    decisions = od.top_k_orderings(W, [[t] for t in range(60)])
    argmax = ex.argmaxable(W)
    assert [d.status == od.REALISABLE for d in decisions] == argmax["argmaxable"].tolist()
    assert [d.status == od.UNREALISABLE for d in decisions] == argmax["never"].tolist()


class TestInvariance:
    """No threshold decides: scaling the head or translating its rows and biases changes no answer."""

    @pytest.mark.parametrize("bias", [False, True])
    def test_scaling(self, bias):
        rng = np.random.default_rng(7)
        W, b = rng.standard_normal((20, 3)), (rng.standard_normal(20) if bias else None)
        orderings = [tuple(int(t) for t in rng.choice(20, 2, replace=False)) for _ in range(40)]
        base = [d.status for d in od.top_k_orderings(W, orderings, b)]
        assert od.UNREALISABLE in base and od.REALISABLE in base and od.UNDECIDED not in base
        for c in (1e-6, 2.0**-70, 1e150):
            scaled = od.top_k_orderings(W * c, orderings, None if b is None else b * c)
            assert [d.status for d in scaled] == base, c

    @pytest.mark.parametrize("bias", [False, True])
    def test_translation(self, bias):
        """Rows on a 2^-20 grid and integer shifts: W + 1tᵀ and b + s are exact, so every pair's
        difference is the same."""
        rng = np.random.default_rng(8)
        W = np.round(rng.standard_normal((20, 3)) * 2**20) / 2**20
        b = np.round(rng.standard_normal(20) * 2**20) / 2**20 if bias else None
        orderings = [tuple(int(t) for t in rng.choice(20, 3, replace=False)) for _ in range(20)]
        base = [d.status for d in od.top_k_orderings(W, orderings, b)]
        for scale in (1.0, 4096.0):
            t = np.round(rng.standard_normal(3) * scale)
            moved = od.top_k_orderings(W + t, orderings, None if b is None else b + scale)
            assert [d.status for d in moved] == base, scale


class TestRegions:
    """Voronoi heads: w_v = p_v, b_v = -|p_v|²/2 make token v win exactly where h is nearest p_v. Eight
    points on the unit circle and q = (3, 0): q's cell starts at x = 2, so q wins within a bound of radius
    R only when R > 2 (its top-2 orderings with it first likewise)."""

    P = np.vstack([ex.circle_head(8), [[3.0, 0.0]]])
    B = -(P**2).sum(axis=1) / 2

    @pytest.mark.parametrize("region_of", [od.Ball, od.Box])
    def test_a_far_token_is_reached_only_by_a_large_enough_bound(self, region_of):
        for R, expected in ((1.9, od.UNREALISABLE), (2.1, od.REALISABLE)):
            region = region_of(R)
            decisions = [od.top_k_orderings(self.P, [o], self.B, region=region)[0] for o in ([8], [8, 0])]
            assert [d.status for d in decisions] == [expected, expected], R
            assert_certified(self.P, self.B, decisions, region)
        unbounded = [od.top_k_orderings(self.P, [o], self.B)[0] for o in ([8], [8, 0])]
        assert [d.status for d in unbounded] == [od.REALISABLE] * 2

    def test_a_box_is_bigger_than_its_ball(self):
        """At R = 1.5 the box reaches (1.5, 1.5), of norm 2.12 > 2, but q's cell lies beyond x = 2: the
        box of radius 1.5 still misses it, the box of radius 2.05 reaches it where the ball does not."""
        decisions = {
            name: od.top_k_orderings(self.P, [[8]], self.B, region=region)[0].status
            for name, region in (("box", od.Box(2.05)), ("ball", od.Ball(2.0)))
        }
        assert decisions == {"box": od.REALISABLE, "ball": od.UNREALISABLE}

    def test_bad_regions_are_refused(self):
        with pytest.raises(InputError, match="radius"):
            od.Ball(0.0)
        with pytest.raises(InputError, match="radii"):
            od.Box([1.0, -1.0])
        with pytest.raises(InputError, match="radii: 3 radii for a head of dimension D = 2"):
            od.top_k_orderings(SQUARE, [[0]], region=od.Box([1.0, 1.0, 1.0]))


def test_an_ordering_left_undecided_is_never_answered(monkeypatch):
    """With the LP and the weights search both failing, the answer is 'undecided', never a guess."""
    monkeypatch.setattr(od, "margin_lp", lambda *args: (math.nan, None))
    monkeypatch.setattr(od, "farkas_weights", lambda *args: None)
    monkeypatch.setattr(od, "whitened_candidate", lambda head, ordering, *args: np.zeros(head.W.shape[1]))
    decisions = od.top_k_orderings(SQUARE, [[0, 1], [0, 2]])
    assert [d.status for d in decisions] == [od.UNDECIDED, od.UNDECIDED]


@pytest.mark.parametrize(
    ("orderings", "message"),
    [
        ([[0, 0]], "repeats a token"),
        ([[0, 5]], r"ids must lie in \[0, 5\)"),
        ([[0.5, 1]], "integer ids"),
        ([0, 1], "expected a 2-D array"),
        (np.zeros((1, 6), dtype=int), "each ordering needs 1 to V = 5 tokens"),
    ],
)
def test_bad_orderings_are_refused(orderings, message):
    with pytest.raises(InputError, match=message):
        od.top_k_orderings(SQUARE, orderings)


class TestSamples:
    def test_small_heads_get_every_ordering(self):
        sample = runner.sample_orderings(5, 2)
        assert sample.kind == "all" and len(sample.orderings) == 20

    def test_large_heads_get_a_seeded_sample_of_distinct_orderings(self):
        first, again = runner.sample_orderings(49152, 3, seed=4), runner.sample_orderings(49152, 3, seed=4)
        assert first.kind == "random" and len(first.orderings) == runner.SAMPLE
        assert np.array_equal(first.orderings, again.orderings)
        assert len({tuple(o) for o in first.orderings}) == runner.SAMPLE
        assert all(len(set(o)) == 3 for o in first.orderings)

    def test_a_token_pool(self):
        sample = runner.sample_orderings(100, 2, tokens=[3, 7, 9])
        assert sample.kind == "tokens" and {tuple(o) for o in sample.orderings} == set(
            itertools.permutations([3, 7, 9], 2)
        )

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"k": 6}, "--k: 6 is out of range"),
            ({"k": 2, "tokens": [1, 1]}, "listed twice"),
            ({"k": 3, "tokens": [1, 2]}, "cannot fill"),
            ({"k": 2, "tokens": [9]}, r"ids must lie in \[0, 5\)"),
            ({"k": 2, "count": 0}, "--sample: 0 is out of range"),
        ],
    )
    def test_bad_samples_are_refused(self, kwargs, message):
        with pytest.raises(InputError, match=message):
            runner.sample_orderings(5, **kwargs)


class TestCommand:
    def test_json_on_the_square(self, tmp_path, capsys):
        np.save(tmp_path / "square.npy", SQUARE)
        assert main(["orderings", "--head", str(tmp_path / "square.npy"), "--k", "2", "--json"]) == EXIT_OK
        record = json.loads(capsys.readouterr().out)
        assert record["counts"] == {"realisable": 8, "unrealisable": 12, "undecided": 0}
        assert record["sample"] == {"kind": "all", "orderings": 20, "seed": None, "tokens": None}
        assert (record["V"], record["D"], record["k"], record["bias"], record["region"]) == (5, 2, 2, False, None)
        unrealisable = [o for o in record["orderings"] if o["status"] == "unrealisable"]
        for o in unrealisable:
            weights = [Fraction(w) for w in o["certificate"]["weights"]]
            assert infeasible_exactly(SQUARE, None, o["certificate"]["pairs"], weights)

    def test_witnesses_and_a_pool(self, tmp_path, capsys):
        np.save(tmp_path / "octahedron.npy", OCTAHEDRON)
        argv = ["orderings", "--head", str(tmp_path / "octahedron.npy"), "--k", "3", "--tokens", "0,1,3,6"]
        assert main([*argv, "--witnesses", "--json"]) == EXIT_OK
        record = json.loads(capsys.readouterr().out)
        assert record["sample"]["kind"] == "tokens" and record["sample"]["orderings"] == 24
        assert record["counts"]["realisable"] == 0  # 0 and 3 share an axis, 6 is the centre
        assert main(["orderings", "--head", str(tmp_path / "octahedron.npy"), "--k", "2", "--json", "--witnesses"]) == 0
        for o in json.loads(capsys.readouterr().out)["orderings"]:
            if o["status"] == "realisable":
                assert realised_exactly(OCTAHEDRON, None, o["witness"], o["ordering"])

    def test_undecided_orderings_exit_three(self, tmp_path, capsys, monkeypatch):
        np.save(tmp_path / "square.npy", SQUARE)
        monkeypatch.setattr(od, "margin_lp", lambda *args: (math.nan, None))
        monkeypatch.setattr(od, "farkas_weights", lambda *args: None)
        monkeypatch.setattr(od, "whitened_candidate", lambda head, ordering, *args: np.zeros(2))
        assert main(["orderings", "--head", str(tmp_path / "square.npy"), "--k", "2"]) == EXIT_INCONCLUSIVE
        assert "undecided" in capsys.readouterr().out

    @pytest.mark.parametrize(
        ("flags", "message"),
        [
            (["--k", "9"], "--k: 9 is out of range"),
            (["--k", "0"], "--k: 0 is out of range"),
            (["--tokens", "1,x"], "expected comma-separated token ids"),
            (["--tokens", "1,2", "--sample", "3"], "not allowed with argument"),
        ],
    )
    def test_bad_flags_exit_two(self, tmp_path, capsys, flags, message):
        np.save(tmp_path / "square.npy", SQUARE)
        assert main(["orderings", "--head", str(tmp_path / "square.npy"), *flags]) == EXIT_USAGE
        assert message in capsys.readouterr().err
