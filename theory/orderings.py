r"""Top-k orderings of an LM head, in all of :math:`\mathbb R^D` or within a bound on h (seed 000, §4).

Seed 000 §4 cites Grivas et al. (2022): when D < V, some orderings of the next-token probabilities cannot
be reached. This module decides, for a head W (V x D) with bias b, which orderings of k tokens it can
realise as its top k, each answer with a certificate that is checked in exact arithmetic.

**Statement.** The ordering :math:`T = (t_1, \dots, t_k)` of distinct tokens is *realisable* within a
region :math:`\mathcal H \subseteq \mathbb R^D` when some :math:`h \in \mathcal H` has

.. math:: z_{t_1} > z_{t_2} > \dots > z_{t_k} > z_j \quad (j \notin T), \qquad z = Wh + b.

Each inequality says :math:`z_p > z_q` for a required pair (p, q): the k - 1 links of the chain and the
V - k pairs :math:`(t_k, j)`; it reads :math:`a_r \cdot h + c_r > 0` with :math:`a_r = w_p - w_q`,
:math:`c_r = b_p - b_q`. k = 1 is the question of :func:`rankwall.theory.expressivity.argmaxable`.
Regions: all of :math:`\mathbb R^D` (``None``), a box :math:`|h_i| \le r_i` (:class:`Box`) or a ball
:math:`\lVert h\rVert_2 \le R` (:class:`Ball`), the bound a final norm layer puts on h.

**Certificates.** *Realisable*: an :math:`h \in \mathcal H` with every :math:`a_r \cdot h + c_r > 0`, checked
exactly (the floats read as the dyadic rationals they are; a rounding bound settles the rivals far
behind, exact integers the rest, as in :meth:`rankwall.theory.expressivity.Head.winners`), and
:math:`h \in \mathcal H` checked exactly. *Unrealisable*: weights :math:`y \ge 0`,
:math:`\sum_r y_r = 1`, on some pairs, with

.. math:: \sigma_{\mathcal H}\Big(\sum_r y_r a_r\Big) + \sum_r y_r c_r \le 0, \qquad
          \sigma_{\mathcal H}(v) = \sup_{h \in \mathcal H} v \cdot h,

where :math:`\sigma = 0` at v = 0 and :math:`+\infty` elsewhere for :math:`\mathbb R^D` (so the condition is
:math:`\sum y_r a_r = 0` and :math:`\sum y_r c_r \le 0`), :math:`\sigma(v) = \sum_i r_i |v_i|` for a box and
:math:`\sigma(v) = R\lVert v\rVert_2` for a ball (checked as :math:`\sum y c \le 0` and
:math:`R^2 \lVert v\rVert^2 \le (\sum y c)^2`, in rationals).

*Proof* (soundness). If some :math:`h \in \mathcal H` satisfied every inequality, then
:math:`0 < \sum_r y_r (a_r \cdot h + c_r) = (\sum_r y_r a_r)\cdot h + \sum_r y_r c_r \le
\sigma_{\mathcal H}(\sum_r y_r a_r) + \sum_r y_r c_r \le 0`, a contradiction. *Completeness*: for
:math:`\mathbb R^D`, the system :math:`a_r \cdot h + c_r s > 0, s > 0` in (h, s) is infeasible exactly when
Gordan's alternative gives such y (an h with s > 0 scales to s = 1); for a compact convex
:math:`\mathcal H`, :math:`\max_{h}\min_{y}\sum_r y_r(a_r\cdot h + c_r) = \min_y \max_h` (von Neumann's minimax
theorem on the simplex times :math:`\mathcal H`), so when no h reaches a positive minimum, some y makes
the maximum, :math:`\sigma(\sum y a) + \sum y c`, at most 0. So every ordering has a certificate one way
or the other; the search below may still fail to find one, and then says "undecided".

**No threshold.** A linear program (HiGHS) proposes the h or the support of y; only the exact checks
decide. Scaling the head (W and b by one positive factor) multiplies every :math:`a_r` and
:math:`c_r` by it, and translating it (every row by the same vector, every bias by the same number)
changes none of them, so neither can change a certificate's validity (in :math:`\mathbb R^D`; a bounded
region is not scale-free, since scaling W is scaling h).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from typing import Any

import numpy as np

from rankwall.theory.expressivity import (
    CHEAP_SCALES,
    COMBINATION_ATTEMPTS,
    LP_CUTS,
    Head,
    dyadic,
    whitening,
    wins_exactly,
)
from rankwall.theory.validation import InputError, as_index_array, as_real_array, check_real_in

REALISABLE, UNREALISABLE, UNDECIDED = "realisable", "unrealisable", "undecided"
#: Relative gap between the planted logits of consecutive tokens in the whitened candidate.
CHAIN_GAP = 0.125
#: Tangent cuts added to the outer polytope of a ball before giving up on a witness in it.
BALL_CUTS = 32
#: Entries (pairs x D) above which the last-resort LP over every pair is skipped: beyond, a dense LP
#: costs minutes (SmolLM2's 49,151 x 576), and the ordering stays undecided instead.
FULL_LP_ENTRIES = 1 << 22
#: Rounds of the cutting-plane LP (each adds up to LP_CUTS rivals) before the weights are sought.
LP_ROUNDS = 24


@dataclass(frozen=True)
class Ball:
    """The region :math:`\\lVert h\\rVert_2 \\le R`."""

    radius: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "radius", check_real_in(self.radius, "radius", 0.0, math.inf, closed=False))


@dataclass(frozen=True, eq=False)
class Box:
    """The region :math:`|h_i| \\le r_i` (one radius for every coordinate, or one each)."""

    radii: np.ndarray

    def __post_init__(self) -> None:
        radii = np.atleast_1d(as_real_array(self.radii, "radii"))
        if radii.ndim != 1 or not np.all(np.isfinite(radii)) or np.any(radii <= 0):
            raise InputError(f"radii: expected positive finite radii, got {self.radii!r:.60}")
        object.__setattr__(self, "radii", radii)

    def of_dimension(self, D: int) -> np.ndarray:
        """The radii as a vector of length D (a single radius is repeated)."""
        if len(self.radii) not in (1, D):
            raise InputError(f"radii: {len(self.radii)} radii for a head of dimension D = {D}")
        return np.broadcast_to(self.radii, (D,)).astype(np.float64)


Region = Ball | Box | None


@dataclass(frozen=True)
class OrderingDecision:
    """The answer for one ordering: ``status`` (realisable, unrealisable, undecided), how it was
    reached, and its certificate: a ``witness`` h, or ``pairs`` (p, q) with exact ``weights``."""

    ordering: tuple[int, ...]
    status: str
    method: str
    witness: np.ndarray | None = None
    pairs: tuple[tuple[int, int], ...] = ()
    weights: tuple[Fraction, ...] = ()
    lp_margin: float = math.nan
    seconds: float = 0.0


# --------------------------------------------------------------------------- exact checks


def inside(region: Region, h: np.ndarray) -> bool:
    """Whether h lies in the region, exactly (a ball's :math:`\\sum h_i^2 \\le R^2` in integers)."""
    if region is None:
        return True
    if isinstance(region, Box):
        return bool(np.all(np.abs(h) <= region.of_dimension(len(h))))
    digits, exponent = dyadic(np.asarray(h, dtype=np.float64))
    squares = sum(int(n) * int(n) for n in digits)
    return Fraction(squares) * Fraction(2) ** (2 * exponent) <= Fraction(region.radius) ** 2


def realises(head: Head, h: np.ndarray, ordering: tuple[int, ...], region: Region = None) -> bool:
    """Whether h (in the region) makes ``ordering`` the top k of W h + b, exactly: the chain by exact
    integer comparisons, the last token against every other by the rounding bound of
    :meth:`Head.logits` and exact comparisons for the rivals within it."""
    if not np.all(np.isfinite(h)) or not inside(region, h):
        return False
    for a, b in pairwise(ordering):
        if not wins_exactly(head, h, a, np.array([b])):
            return False
    last = ordering[-1]
    z, error = head.logits(h[None, :])
    z, error = z[:, 0], error[:, 0]
    if not np.all(np.isfinite(z)):
        return False
    rivals = np.setdiff1d(np.arange(len(z)), ordering)
    if np.any(z[rivals] - error[rivals] > z[last] + error[last]):
        return False
    unsure = rivals[z[rivals] + error[rivals] >= z[last] - error[last]]
    return len(unsure) == 0 or wins_exactly(head, h, last, unsure)


def pair_rows(head: Head, pairs: np.ndarray) -> tuple[np.ndarray, list[Fraction]]:
    """The rows :math:`a_r = w_p - w_q` as integers (one common power of two dropped, which scales
    every :math:`a_r` alike) and :math:`c_r = b_p - b_q` as exact rationals."""
    used = np.unique(pairs)
    digits, _ = dyadic(head.W[used])
    where = {int(t): i for i, t in enumerate(used)}
    rows = np.array([digits[where[int(p)]] - digits[where[int(q)]] for p, q in pairs], dtype=object)
    biases = [Fraction(float(head.b[p])) - Fraction(float(head.b[q])) for p, q in pairs]
    return rows.reshape(len(pairs), head.W.shape[1]), biases


def support_function(region: Region, v: list[Fraction]) -> Fraction | None:
    """:math:`\\sigma(v)` for a box (a rational); None for a ball (irrational: compare squares) or for
    :math:`\\mathbb R^D` with v != 0 (infinite)."""
    if region is None:
        return Fraction(0) if not any(v) else None
    if isinstance(region, Box):
        radii = region.of_dimension(len(v))
        return sum((Fraction(float(r)) * abs(x) for r, x in zip(radii, v, strict=True)), Fraction(0))
    return None


def certifies(head: Head, pairs: np.ndarray, weights: list[Fraction], region: Region = None) -> bool:
    """Whether weights :math:`y \\ge 0` summing to 1 on ``pairs`` prove that no h in the region
    satisfies every :math:`z_p > z_q` (the module docstring's condition, in exact rationals)."""
    if len(weights) != len(pairs) or any(w < 0 for w in weights) or sum(weights) != 1:
        return False
    rows, biases = pair_rows(head, pairs)
    scale = Fraction(2) ** dyadic(head.W[np.unique(pairs)])[1]  # the power of two pair_rows dropped
    v = [scale * sum((w * int(x) for w, x in zip(weights, column, strict=True)), Fraction(0)) for column in rows.T]
    offset = sum((w * c for w, c in zip(weights, biases, strict=True)), Fraction(0))
    if isinstance(region, Ball):
        return offset <= 0 and Fraction(region.radius) ** 2 * sum(x * x for x in v) <= offset * offset
    sigma = support_function(region, v)
    return sigma is not None and sigma + offset <= 0


# --------------------------------------------------------------------------- the system of one ordering


@dataclass(frozen=True, eq=False)
class PairSystem:
    """The required pairs of one ordering: the chain, then :math:`(t_k, j)` for every j outside T."""

    head: Head
    ordering: tuple[int, ...]
    pairs: np.ndarray  # (V - 1, 2)

    @classmethod
    def of(cls, head: Head, ordering: tuple[int, ...]) -> PairSystem:
        chain = list(pairwise(ordering))
        rest = np.setdiff1d(np.arange(head.W.shape[0]), ordering)
        pairs = np.array(chain + [(ordering[-1], int(j)) for j in rest], dtype=np.int64).reshape(-1, 2)
        return cls(head, ordering, pairs)

    @property
    def chain(self) -> np.ndarray:
        return np.arange(len(self.ordering) - 1)

    def differences(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:math:`a_r` and :math:`c_r` in float64 for some rows."""
        p, q = self.pairs[rows, 0], self.pairs[rows, 1]
        return self.head.W[p] - self.head.W[q], self.head.b[p] - self.head.b[q]

    def strongest(self, h: np.ndarray, exclude: np.ndarray) -> np.ndarray:
        """The rows of the rivals most likely to beat the last token at h (their float logits, highest
        first; at most :data:`LP_CUTS`, none of ``exclude``)."""
        z = self.head.W @ h + self.head.b
        k = len(self.ordering)
        strength = z[self.pairs[k - 1 :, 1]]
        strength[np.isin(np.arange(k - 1, len(self.pairs)), exclude)] = -np.inf
        top = np.argsort(-strength, kind="stable")[:LP_CUTS]
        return (top[np.isfinite(strength[top])] + k - 1).astype(np.int64)

    def threats(self, h: np.ndarray, exclude: np.ndarray) -> np.ndarray:
        """Rows of rivals that beat or may beat the last token at h (within the rounding bound), the
        strongest :data:`LP_CUTS` of them not in ``exclude``."""
        z, error = self.head.logits(h[None, :])
        z, error = z[:, 0], error[:, 0]
        last = self.ordering[-1]
        k = len(self.ordering)
        rivals = self.pairs[k - 1 :, 1]
        threat = z[rivals] + error[rivals] >= z[last] - error[last]
        rows = np.flatnonzero(threat) + k - 1
        rows = rows[~np.isin(rows, exclude)]
        return rows[np.argsort(-z[self.pairs[rows, 1]], kind="stable")][:LP_CUTS]


def margin_lp(system: PairSystem, rows: np.ndarray, region: Region) -> tuple[float, np.ndarray | None]:
    """Maximise the smallest scaled :math:`a_r \\cdot h + c_r` over the rows (HiGHS), and propose the h.

    In :math:`\\mathbb R^D` the LP is homogenised as in :func:`rankwall.theory.expressivity.argmax_lp`:
    (h, s, δ) with :math:`a_r h/\\sigma_a + c_r s/\\sigma_c \\ge \\delta`, h in [-1, 1]^D, s in [0, 1]; s = 0 is
    a direction at infinity, scaled past every bias gap. In a box, h ranges over it. In a ball, h
    ranges over an outer polytope (the box [-R, R]^D and tangent cuts added while the answer lies
    outside the ball, :data:`BALL_CUTS` at most) and the answer is pulled back onto the ball.
    Returns the margin and the proposal (None when the LP fails); only an exact check decides."""
    from scipy.optimize import linprog

    a, c = system.differences(rows)
    D = a.shape[1]
    if region is None:
        scale_a, scale_c = float(np.abs(a).max()) or 1.0, float(np.abs(c).max()) or 1.0
        A = np.hstack([-a / scale_a, -c[:, None] / scale_c, np.ones((len(rows), 1))])
        cost = np.zeros(D + 2)
        cost[-1] = -1.0
        result = linprog(cost, A_ub=A, b_ub=np.zeros(len(rows)), bounds=[(-1, 1)] * D + [(0, 1), (None, None)])
        if result.status != 0:
            return math.nan, None
        h, s = result.x[:D], result.x[D]
        if s > 0:
            return float(-result.fun), h * (scale_c / (scale_a * s))
        gains = a @ h
        needed = np.max(np.where(gains > 0, -c / np.where(gains > 0, gains, 1.0), 0.0), initial=0.0)
        return float(-result.fun), h * (2 * needed + 1)
    radii = region.of_dimension(D) if isinstance(region, Box) else np.full(D, region.radius)
    scale = float(np.max(np.abs(a) @ radii + np.abs(c))) or 1.0
    cuts = np.empty((0, D))
    for _ in range(BALL_CUTS + 1):
        A = np.vstack([np.hstack([-a / scale, np.ones((len(rows), 1))]), np.hstack([cuts, np.zeros((len(cuts), 1))])])
        b_ub = np.r_[c / scale, np.full(len(cuts), getattr(region, "radius", 0.0))]
        bounds = [(-r, r) for r in radii] + [(None, None)]
        cost = np.zeros(D + 1)
        cost[-1] = -1.0
        result = linprog(cost, A_ub=A, b_ub=b_ub, bounds=bounds)
        if result.status != 0:
            return math.nan, None
        h = result.x[:D]
        norm = float(np.linalg.norm(h))
        if isinstance(region, Box) or norm <= region.radius:
            return float(-result.fun), h
        cuts = np.vstack([cuts, h / norm])
    return float(-result.fun), h * (region.radius / norm) * (1 - 2.0**-40)


def farkas_weights(system: PairSystem, rows: np.ndarray, region: Region) -> list[Fraction] | None:
    """Weights on ``rows`` that certify infeasibility in the region, or None.

    :math:`\\mathbb R^D`: the basic solution (HiGHS dual simplex) of minimising :math:`\\sum y c/\\sigma_c` under
    :math:`\\sum y a/\\sigma_a = 0`, :math:`\\sum y = 1`, :math:`y \\ge 0` gives a support; the weights are then
    solved on it in exact rationals (python-flint) and rows with negative weights dropped
    (:data:`COMBINATION_ATTEMPTS` supports). Box: the LP's :math:`\\min \\sum r_i t_i + \\sum y c` under
    :math:`|\\sum y a| \\le t`. Ball: the same with r = R (a box around the ball), its weights then moved by
    SLSQP towards :math:`\\min R\\lVert\\sum y a\\rVert + \\sum y c`. The float weights of the box and ball are
    rounded to rationals summing to 1; :func:`certifies` decides."""
    from scipy.optimize import linprog

    a, c = system.differences(rows)
    D = a.shape[1]
    scale_a, scale_c = float(np.abs(a).max()) or 1.0, float(np.abs(c).max()) or 1.0
    if region is None:
        candidates = np.arange(len(rows))
        A = np.vstack([(a / scale_a).T, np.ones(len(rows))])
        for _ in range(COMBINATION_ATTEMPTS):
            result = linprog(
                c[candidates] / scale_c,
                A_eq=A[:, candidates],
                b_eq=np.r_[np.zeros(D), 1.0],
                bounds=(0, None),
                method="highs-ds",
            )
            if result.status != 0 or result.fun > 0:
                return None
            positive = result.x > 0
            support = candidates[positive]
            weights = exact_weights(system, rows[support])
            if weights is None or any(w < 0 for w in weights):  # the face holding the solution, exactly
                support, interior = interior_solution(A[:, candidates], c[candidates] / scale_c, result.fun)
                support = candidates[support]
                weights = projected_weights(system, rows[support], interior) if len(support) else None
            if weights is not None and not any(w < 0 for w in weights):
                full = [Fraction(0)] * len(rows)
                for i, w in zip(support, weights, strict=True):
                    full[i] = w
                if certified_on_support(system, rows, full, region):
                    return full
            candidates = np.setdiff1d(candidates, support[np.argmin(result.x[positive])])
        return None
    everywhere = farkas_weights(system, rows, None)  # infeasible in all of R^D: in the region too
    if everywhere is not None:
        return everywhere
    radii = region.of_dimension(D) if isinstance(region, Box) else np.full(D, region.radius)
    n = len(rows)
    scale = float(np.max(np.abs(a) @ radii + np.abs(c))) or 1.0
    # variables (y, t): min r.t + c.y / scale, with -t <= a^T y / scale <= t, sum y = 1
    A_ub = np.block([[a.T / scale, -np.eye(D)], [-a.T / scale, -np.eye(D)]])
    result = linprog(
        np.r_[c / scale, radii],
        A_ub=A_ub,
        b_ub=np.zeros(2 * D),
        A_eq=np.r_[np.ones(n), np.zeros(D)][None, :],
        b_eq=[1.0],
        bounds=(0, None),
    )
    if result.status != 0 or result.fun > 0:
        return None
    y = result.x[:n]
    candidates = [y]
    if isinstance(region, Ball):
        candidates.append(polished_ball_weights(a / scale, c / scale, region.radius, y))
    for weights in candidates:
        exact = rational_weights(weights)
        if exact is not None and certified_on_support(system, rows, exact, region):
            return exact
    return None


def certified_on_support(system: PairSystem, rows: np.ndarray, weights: list[Fraction], region: Region) -> bool:
    """:func:`certifies` on the rows that carry weight (the others add nothing, and reading every row
    of a large head as integers would cost more than the LP)."""
    used = [i for i, w in enumerate(weights) if w != 0]
    return certifies(system.head, system.pairs[rows[used]], [weights[i] for i in used], region)


def polished_ball_weights(a: np.ndarray, c: np.ndarray, radius: float, start: np.ndarray) -> np.ndarray:
    """Weights on the support of ``start`` moved by SLSQP towards the minimum over the simplex of
    :math:`R\\lVert\\sum y a\\rVert + \\sum y c` (the ball's support function)."""
    from scipy.optimize import minimize

    support = np.flatnonzero(start > 0)
    if len(support) == 0:
        return start
    a_s, c_s = a[support], c[support]

    def objective(y: np.ndarray) -> float:
        return float(radius * np.linalg.norm(y @ a_s) + y @ c_s)

    result = minimize(
        objective,
        start[support],
        method="SLSQP",
        bounds=[(0, None)] * len(support),
        constraints=[{"type": "eq", "fun": lambda y: float(np.sum(y) - 1)}],
    )
    polished = np.zeros_like(start)
    polished[support] = np.maximum(result.x, 0)
    return polished


def rational_weights(y: np.ndarray) -> list[Fraction] | None:
    """Non-negative float weights as exact rationals summing to 1 (None if they are all zero)."""
    y = np.where(np.isfinite(y) & (y > 0), y, 0.0)
    total = sum((Fraction(float(x)) for x in y), Fraction(0))
    return None if total == 0 else [Fraction(float(x)) / total for x in y]


def interior_solution(A: np.ndarray, cost: np.ndarray, optimum: float) -> tuple[np.ndarray, np.ndarray]:
    r"""A point of the relative interior of the optimal face of :math:`\min cost\cdot y` under
    :math:`Ay = e_{last}`, :math:`y \ge 0` (HiGHS' interior point method without crossover, on the
    face cut out by cost.y <= optimum): the indices where it is positive and its values there. A
    basic solution sits on a vertex of the face that rounding may have moved off the exact face; the
    interior point weighs every row of the face."""
    import warnings

    from scipy.optimize import OptimizeWarning, linprog

    rows = A.shape[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)  # run_crossover goes to HiGHS verbatim
        result = linprog(
            np.zeros(rows),
            A_ub=cost[None, :],
            b_ub=[max(optimum, 0.0)],
            A_eq=A,
            b_eq=np.r_[np.zeros(A.shape[0] - 1), 1.0],
            bounds=(0, None),
            method="highs-ipm",
            options={"run_crossover": "off"},
        )
    if result.status != 0:
        return np.array([], dtype=np.int64), np.array([])
    y = result.x
    support = np.flatnonzero(y > y.max() * 1e-9)
    return support, y[support]


def projected_weights(system: PairSystem, rows: np.ndarray, approximate: np.ndarray) -> list[Fraction] | None:
    r"""The float weights ``approximate`` on ``rows``, read as rationals and projected orthogonally, in
    exact arithmetic, onto the solutions of :math:`\sum_r y_r a_r = 0`, :math:`\sum_r y_r = 1` (python-flint:
    the equations reduced to independent ones by ``rref``, then :math:`y - A^\top(AA^\top)^{-1}(Ay - e)`);
    None when the equations have no solution on these rows. Weights well inside the face stay positive:
    the projection moves them by rounding-sized amounts."""
    from flint import fmpq, fmpq_mat

    integer_rows, _ = pair_rows(system.head, system.pairs[rows])
    k = len(rows)
    augmented = fmpq_mat([[*column, 0] for column in integer_rows.T.tolist()] + [[1] * k + [1]])
    reduced, rank = augmented.rref()
    if any(reduced[r, k] != 0 and all(reduced[r, col] == 0 for col in range(k)) for r in range(rank)):
        return None  # a pivot in the right-hand side: inconsistent
    A = fmpq_mat(rank, k, [reduced[r, col] for r in range(rank) for col in range(k)])
    e = fmpq_mat(rank, 1, [reduced[r, k] for r in range(rank)])
    y = fmpq_mat(k, 1, [fmpq(*float(x).as_integer_ratio()) for x in approximate])
    correction = A.transpose() * (A * A.transpose()).solve(A * y - e)
    projected = y - correction
    return [Fraction(int(projected[i, 0].p), int(projected[i, 0].q)) for i in range(k)]


def exact_weights(system: PairSystem, rows: np.ndarray) -> list[Fraction] | None:
    """Weights with :math:`\\sum_r y_r a_r = 0` and :math:`\\sum_r y_r = 1` on the given rows, solved in
    exact rationals (python-flint ``fmpq_mat.rref``: the pivot rows take the weight, the others 0);
    None when the equations have no solution on these rows."""
    from flint import fmpq_mat

    integer_rows, _ = pair_rows(system.head, system.pairs[rows])
    k = len(rows)
    system_rows = [[*column, 0] for column in integer_rows.T.tolist()] + [[1] * k + [1]]
    reduced, rank = fmpq_mat(system_rows).rref()
    weights = [Fraction(0)] * k
    for r in range(rank):
        pivot = next(col for col in range(k + 1) if reduced[r, col] != 0)
        if pivot == k:
            return None
        entry = reduced[r, k]
        weights[pivot] = Fraction(int(entry.p), int(entry.q))
    return weights


# --------------------------------------------------------------------------- deciding orderings


def whitened_candidate(
    head: Head, ordering: tuple[int, ...], mean: np.ndarray, inverse: np.ndarray, scale: float
) -> np.ndarray:
    r"""An h in the whitened span of the ordering's rows with planted logits: with
    :math:`x_t = w_t - \bar w` and :math:`h = C^+ X^\top\beta`, solve :math:`XC^+X^\top\beta = s\,\tau - b_T`
    with :math:`\tau_i = 1 + (k - i)\cdot` :data:`CHAIN_GAP` (least squares when singular), so the
    chain holds by construction and the rivals' logits stay near their mean when the rows are spread."""
    X = head.W[list(ordering)] - mean
    k = len(ordering)
    target = scale * (1 + CHAIN_GAP * np.arange(k - 1, -1, -1)) - head.b[list(ordering)]
    gram = X @ inverse @ X.T
    beta = np.linalg.lstsq(gram, target, rcond=None)[0]
    return inverse @ X.T @ beta


def into_region(h: np.ndarray, region: Region) -> np.ndarray:
    """h times the largest power of two (at most 1) that brings it inside the region, an exact scaling."""
    if region is None or inside(region, h):
        return h
    size = (
        np.max(np.abs(h) / region.of_dimension(len(h)))
        if isinstance(region, Box)
        else (float(np.linalg.norm(h)) / region.radius)
    )
    h = np.ldexp(h, -int(np.ceil(np.log2(size))) if size > 0 else 0)
    while not inside(region, h):
        h = np.ldexp(h, -1)
    return h


def duplicate_certificate(
    head: Head, ordering: tuple[int, ...]
) -> tuple[tuple[tuple[int, int], ...], tuple[Fraction, ...]] | None:
    """Weights from a duplicated row, found by exact comparisons of the float rows: a token t_i of the
    ordering whose row another token j repeats (j later in the ordering, or outside it) with a bias at
    least as large. z_j = z_{t_i} + (b_j - b_{t_i}) for every h, so the links from t_i down to j (or to
    t_k and then j) cannot all be strict: equal weights on those m pairs sum the rows to w_{t_i} - w_j = 0
    and the biases to b_{t_i} - b_j <= 0. None when no such twin exists (cost: one pass over W per token)."""
    W, b = head.W, head.b
    for i, t in enumerate(ordering):
        same = np.flatnonzero(np.all(W == W[t], axis=1) & (b >= b[t]))
        for j in same[same != t]:
            j = int(j)
            later = ordering.index(j) if j in ordering else None
            if later is not None and later < i:
                continue
            chain = list(pairwise(ordering[i : (later + 1) if later is not None else len(ordering)]))
            pairs = tuple(chain if later is not None else [*chain, (ordering[-1], j)])
            return tuple((int(p), int(q)) for p, q in pairs), tuple(Fraction(1, len(pairs)) for _ in pairs)
    return None


def decide_ordering(
    head: Head, ordering: tuple[int, ...], region: Region = None, whitened: tuple[np.ndarray, np.ndarray] | None = None
) -> OrderingDecision:
    """Realisable (a witness), unrealisable (exact weights) or undecided, for one ordering (see the
    module docstring). Cheapest first: a duplicated row (:func:`duplicate_certificate`, valid in any
    region); the whitened h at a few scales (moved into the region by a power of two); the cutting-plane
    margin LP over the chain and the rivals that threaten its proposals (:data:`LP_ROUNDS` rounds); then
    weights on the LP's rows, then on every row (when at most :data:`FULL_LP_ENTRIES`)."""
    started = time.perf_counter()
    system = PairSystem.of(head, ordering)
    mean, inverse = whitened if whitened is not None else whitening(head.W)
    bias_scale = float(np.abs(head.b).max())
    scales = [1.0] if bias_scale == 0 else [bias_scale * s for s in CHEAP_SCALES]

    def done(status: str, method: str, **certificate: Any) -> OrderingDecision:
        return OrderingDecision(ordering, status, method, seconds=time.perf_counter() - started, **certificate)

    twins = duplicate_certificate(head, ordering)
    if twins is not None:
        pairs, weights = twins
        return done(UNREALISABLE, "duplicate row", pairs=pairs, weights=weights)
    start = None
    for s in scales:
        h = into_region(whitened_candidate(head, ordering, mean, inverse, s), region)
        if realises(head, h, ordering, region):
            return done(REALISABLE, "certificate whitened", witness=h)
        start = h if start is None else start
    rows = np.r_[system.chain, system.strongest(start, system.chain)].astype(np.int64)
    margin = math.nan
    for _ in range(LP_ROUNDS):
        margin, h = margin_lp(system, rows, region)
        if h is not None and realises(head, h, ordering, region):
            return done(REALISABLE, "LP, re-checked", witness=h, lp_margin=margin)
        if h is None or not margin > 0:
            break
        added = system.threats(h, rows)
        if len(added) == 0:
            break
        rows = np.r_[rows, added]
    attempts = [rows]
    if len(rows) < len(system.pairs) and len(system.pairs) * head.W.shape[1] <= FULL_LP_ENTRIES:
        attempts.append(np.arange(len(system.pairs)))
    for candidate_rows in attempts:
        weights = farkas_weights(system, candidate_rows, region)
        if weights is not None:
            used = [i for i, w in enumerate(weights) if w > 0]
            pairs = tuple((int(p), int(q)) for p, q in system.pairs[candidate_rows[used]])
            return done(
                UNREALISABLE, "Farkas weights", pairs=pairs, weights=tuple(weights[i] for i in used), lp_margin=margin
            )
    return done(UNDECIDED, "no certificate", lp_margin=margin)


def validated_orderings(orderings: Any, V: int) -> np.ndarray:
    """Orderings as an (n, k) int64 array of token ids in [0, V), distinct within each ordering."""
    ids = as_index_array(orderings, "orderings", V, ndim=2)
    if ids.shape[1] < 1 or ids.shape[1] > V:
        raise InputError(f"orderings: each ordering needs 1 to V = {V} tokens, got {ids.shape[1]}")
    repeated = [i for i, row in enumerate(ids) if len(set(row.tolist())) < len(row)]
    if repeated:
        raise InputError(f"orderings: ordering {repeated[0]} repeats a token: {ids[repeated[0]].tolist()}")
    return ids


def top_k_orderings(
    W: Any, orderings: Any, bias: Any = None, *, region: Region = None, on_progress: Any = None
) -> list[OrderingDecision]:
    """Decide each ordering (rows of ``orderings``: k distinct token ids) for the head (W, bias), in
    the region (None: all of :math:`\\mathbb R^D`); ``on_progress()`` after each."""
    head = Head.of(W, bias)
    ids = validated_orderings(orderings, head.W.shape[0])
    if isinstance(region, Box):
        region.of_dimension(head.W.shape[1])
    whitened = whitening(head.W)
    decisions = []
    for row in ids:
        decisions.append(decide_ordering(head, tuple(int(t) for t in row), region, whitened))
        if on_progress is not None:
            on_progress()
    return decisions


def rms_norm_region(gain: Any, kind: str = "ball") -> Ball | Box:
    r"""The region holding every output of an RMSNorm layer with gain g (D entries) computed in float32,
    as a ball (``kind="ball"``) or a box (``"box"``).

    An RMSNorm maps x to :math:`h = g \odot x/\sqrt{\overline{x^2} + \epsilon}` (ε >= 0), and
    :math:`\sum_i x_i^2/(\overline{x^2} + \epsilon) = D\,\overline{x^2}/(\overline{x^2} + \epsilon) \le D`, so
    :math:`\lVert h\rVert_2 \le \max_i |g_i|\sqrt D` and :math:`|h_i| \le |g_i|\sqrt D` (as
    :math:`x_i^2 \le \sum_j x_j^2`). In float32 the mean of squares is off by a factor within
    :math:`1 \pm \gamma_{D+1}`, adding ε, the reciprocal square root (at most 1 ulp) and the two products
    by at most one rounding each, so the computed h exceeds the exact bound by at most the factor
    :math:`(1 - \gamma_{D+2})^{-1/2}(1 + 2u)(1 + u)^2 \le 1 + \gamma_{2D+8}` (u of float32), which the
    radii include."""
    from rankwall.theory._rounding import gamma, unit_roundoff

    g = as_real_array(gain, "gain", ndim=1)
    if len(g) < 1 or not np.all(np.isfinite(g)):
        raise InputError("gain: expected a non-empty vector of finite numbers")
    if kind not in ("ball", "box"):
        raise InputError(f"kind: expected 'ball' or 'box', got {kind!r}")
    D = len(g)
    factor = (1 + gamma(2 * D + 8, unit_roundoff(np.float32))) * math.sqrt(D)
    if kind == "ball":
        return Ball(float(np.abs(g).max()) * factor)
    if np.any(g == 0):
        raise InputError("gain: a zero gain pins its coordinate of h at 0, which a box cannot express")
    return Box(np.abs(g) * factor)
