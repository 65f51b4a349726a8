r"""Expressivity of the LM head (seed 000, §2.1, Appendix A.2: Prop. A.2 and Prop. A.4; App. B.1).

1. *Prop. A.2 (Gibbs).* The cross-entropy of P against the empirical :math:`\tilde N`, weighted by
   context frequencies f, exceeds that of :math:`\tilde N` itself by
   :math:`\sum_c f_c\,\mathrm{KL}(\tilde N_c \,\|\, P_c) \ge 0`: it is minimised exactly at
   :math:`P = \tilde N` (on the contexts that occur).
2. *Prop. A.4.* For D >= 2, any V, any target token :math:`t_c` and any top-1 probability
   :math:`p_c \in (1/V, 1)` per context, there are H and W with no bias such that every context's
   argmax is :math:`t_c` and its top-1 probability is within :math:`\varepsilon` of :math:`p_c`.
   Witness: the rows of W on the unit circle, :math:`w_v = (\cos\theta_v, \sin\theta_v)`,
   :math:`\theta_v = 2\pi v/V`, and :math:`h_c = r_c w_{t_c}`; the top-1 probability
   :math:`1/\sum_v e^{r(\cos\theta_v - 1)}` rises continuously from 1/V (r = 0) to 1 (r -> oo), so
   a bisection finds :math:`r_c`. Extra dimensions are zero.
3. *D = 1.* Without a bias, the logits :math:`hw_v` are maximised at the largest or the smallest
   :math:`w_v`: for V >= 3 a token with an interior :math:`w_v` is never the strict argmax. With a bias,
   D = 1 makes every token the argmax: the lines :math:`z_v(h) = w_v h - w_v^2/2` are tangent to
   the convex curve :math:`h^2/2`, so token v wins exactly near :math:`h = w_v`. (With one shared
   head, the reachable top-1 probabilities of a token are an interval set by the head, not all of
   (1/V, 1): D = 1 with a bias buys the argmax, not the full Prop. A.4.) That interval is
   :func:`d1_top1_range`: :math:`-\log p_t(h)` is a log-sum-exp of affine functions of h, so
   :math:`p_t` is log-concave on the interval where t wins. For V >= 3 only a token of the largest or
   the smallest weight can reach both 3/4 and :math:`1/V + 1/(4V^2)` (Theorem EX.3 (4)):
   :func:`d1_tokens_reaching`; :func:`line_head` builds such heads (with a bias) for the claim.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import array_api_compat
import numpy as np

from rankwall.theory._rounding import gamma, unit_roundoff
from rankwall.theory._softmax import log_softmax as log_softmax  # the shared one, under its old name
from rankwall.theory.validation import InputError, as_real_array, check_integer_in, check_real_in

#: Bisection steps for the circle radius after the bracket is found (2^-64 of the bracket: below
#: one ulp of r).
RADIUS_STEPS = 64


def _namespace(*arrays: Any) -> tuple[Any, tuple[Any, ...]]:
    """The array namespace of ``arrays`` (array-api-compat) and the arrays; NumPy arrays and anything
    else (lists, scalars) become NumPy float64, as before the array API."""
    try:
        xp = array_api_compat.array_namespace(*arrays)
    except TypeError:
        xp = array_api_compat.array_namespace(np.empty(0))
    if array_api_compat.is_numpy_namespace(xp):
        arrays = tuple(np.asarray(x, dtype=np.float64) for x in arrays)
    return xp, arrays


def kl_gap(P: Any, N_tilde: Any, f: Any, *, log_P: Any = None) -> tuple[float, float]:
    """``(CE(P) - CE(Ñ), sum_c f_c KL(Ñ_c || P_c))``: the two sides of Gibbs' identity, with
    0 log 0 = 0, computed in the namespace and dtype of the arrays (array-api-compat). P must be
    positive wherever Ñ is, unless ``log_P`` (log P, e.g. from :func:`log_softmax`, finite where Ñ > 0)
    is given: then the logs are taken from it and P is checked for shape and sign only."""
    xp, (P, N_tilde, f) = _namespace(P, N_tilde, f)
    if log_P is not None:
        log_P = xp.asarray(log_P, dtype=P.dtype, device=array_api_compat.device(P))
    if P.shape != N_tilde.shape or P.ndim != 2 or f.shape != (P.shape[0],):
        raise InputError(f"P: shape {P.shape}, Ñ {N_tilde.shape} and f {f.shape} do not fit together")
    if log_P is not None and log_P.shape != P.shape:
        raise InputError(f"log_P: shape {log_P.shape} does not fit P's {P.shape}")
    if bool(xp.any(P < 0)) or bool(xp.any(N_tilde < 0)) or bool(xp.any(f < 0)):
        raise InputError("P: probabilities and frequencies must be non-negative")
    support = N_tilde > 0
    ones = xp.ones_like(P)
    if log_P is None:
        if bool(xp.any(xp.logical_and(support, P == 0))):
            raise InputError("P: zero probability on an observed token (the cross-entropy is infinite)")
        logP = xp.log(xp.where(support, P, ones))
    else:
        logP = xp.where(support, log_P, xp.zeros_like(P))
        if not bool(xp.all(xp.isfinite(logP))):
            raise InputError("log_P: not finite on an observed token (the cross-entropy is infinite)")
    logN = xp.log(xp.where(support, N_tilde, ones))
    weights = f[:, None] * N_tilde
    ce_P = -xp.sum(weights * logP)
    ce_N = -xp.sum(weights * logN)
    kl = xp.sum(weights * (logN - logP))
    return float(ce_P - ce_N), float(kl)


def circle_head(V: int, D: int = 2) -> np.ndarray:
    """W (V x D): rows :math:`(\\cos 2\\pi v/V, \\sin 2\\pi v/V, 0, \\dots)`."""
    V = check_integer_in(V, "V", 2, 1 << 24)
    D = check_integer_in(D, "D", 2, 1 << 16)
    theta = 2 * np.pi * np.arange(V) / V
    W = np.zeros((V, D))
    W[:, 0], W[:, 1] = np.cos(theta), np.sin(theta)
    return W


def circle_top1(radius: Any, V: int) -> np.ndarray:
    """Top-1 probability :math:`1/\\sum_v e^{r(\\cos\\theta_v - 1)}` of the circle witness at radius r."""
    radius = np.atleast_1d(np.asarray(radius, dtype=np.float64))
    gaps = np.cos(2 * np.pi * np.arange(V) / V) - 1.0  # <= 0, zero at v = 0
    return 1.0 / np.exp(radius[:, None] * gaps[None, :]).sum(axis=1)


def circle_radius(probabilities: Any, V: int) -> np.ndarray:
    """Radii r with top-1 probability p on the V-point circle, by bisection (monotone in r)."""
    p = np.atleast_1d(np.asarray(probabilities, dtype=np.float64))
    distinct, where = np.unique(p, return_inverse=True)
    low = np.zeros_like(distinct)
    high = np.ones_like(distinct)
    while np.any(circle_top1(high, V) < distinct):
        high = np.where(circle_top1(high, V) < distinct, 2 * high, high)
    for _ in range(RADIUS_STEPS):
        middle = (low + high) / 2
        below = circle_top1(middle, V) < distinct
        low, high = np.where(below, middle, low), np.where(below, high, middle)
    return ((low + high) / 2)[where]


def construct_top1_witness(targets: Any, probs: Any, D: int, eps: float, V: int) -> tuple[np.ndarray, np.ndarray]:
    """H (C x D) and W (V x D), no bias, with argmax :math:`t_c` and top-1 probability within
    ``eps`` of :math:`p_c` for every context (Prop. A.4's circle construction)."""
    V = check_integer_in(V, "V", 2, 1 << 24)
    D = check_integer_in(D, "D", 2, 1 << 16)
    eps = check_real_in(eps, "eps", 0.0, 1.0, closed=False)
    targets = np.asarray(targets)
    probs = np.asarray(probs, dtype=np.float64)
    if targets.ndim != 1 or targets.shape != probs.shape or len(targets) == 0:
        raise InputError(f"targets: shape {targets.shape} and probs {probs.shape} must be equal 1-D, non-empty")
    if not np.issubdtype(targets.dtype, np.integer) or targets.min() < 0 or targets.max() >= V:
        raise InputError(f"targets: token ids must be integers in [0, {V})")
    if not np.all(np.isfinite(probs)) or np.any(probs <= 1.0 / V) or np.any(probs >= 1.0):
        bad = probs[~(np.isfinite(probs) & (probs > 1.0 / V) & (probs < 1.0))][0]
        raise InputError(f"probs: {float(bad)!r} is outside (1/V, 1) = ({1.0 / V:.3g}, 1)")
    W = circle_head(V, D)
    H = circle_radius(probs, V)[:, None] * W[targets]
    return H, W


def top1(
    H: np.ndarray, W: np.ndarray, bias: np.ndarray | None = None, block: int = 64
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(argmax, top-1 probability, tie count)`` of softmax(W h + b) for every row of H, streamed."""
    argmax, probability, ties = [], [], []
    for start in range(0, H.shape[0], block):
        z = H[start : start + block] @ W.T
        if bias is not None:
            z = z + bias
        top = z.max(axis=1, keepdims=True)
        argmax.append(z.argmax(axis=1))
        ties.append((z == top).sum(axis=1))
        probability.append(1.0 / np.exp(z - top).sum(axis=1))
    return np.concatenate(argmax), np.concatenate(probability), np.concatenate(ties)


def tangent_head(V: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """D = 1 with a bias: slopes :math:`w_v` (distinct, sorted) and biases :math:`-w_v^2/2`."""
    V = check_integer_in(V, "V", 2, 1 << 24)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    w = np.sort(rng.uniform(-1, 1, size=V))
    return w[:, None], -(w**2) / 2


#: The shapes :func:`line_head` builds.
LINE_SHAPES = ("tangent", "concurrent", "gaussian")


def line_head(V: int, shape: str, seed: int, scale: float = 1.0, jitter: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """D = 1 with a bias, :math:`z_v(h) = w_v h + b_v`: slopes :math:`w_v` drawn uniformly on
    (-scale, scale) and sorted, and biases by ``shape``: ``"tangent"`` :math:`b_v = -w_v^2/2` (the
    tangent head, its slopes scaled); ``"concurrent"`` :math:`b_v = -w_v h_0` (every line through
    :math:`(h_0, 0)`, :math:`h_0` drawn on (-1, 1), where all tokens tie); ``"gaussian"`` standard
    normal biases times ``scale``. ``jitter`` times a standard normal draw is added to every bias."""
    V = check_integer_in(V, "V", 2, 1 << 24)
    if shape not in LINE_SHAPES:
        raise InputError(f"shape: expected one of {', '.join(LINE_SHAPES)}, got {shape!r}")
    scale = check_real_in(scale, "scale", 0.0, math.inf, closed=False)
    jitter = check_real_in(jitter, "jitter", 0.0, math.inf)
    rng = np.random.default_rng(check_integer_in(seed, "seed", 0))
    w = np.sort(rng.uniform(-1, 1, size=V)) * scale
    if shape == "tangent":
        b = -(w**2) / 2
    elif shape == "concurrent":
        b = -w * rng.uniform(-1, 1)
    else:
        b = rng.standard_normal(V) * scale
    if jitter:
        b = b + jitter * rng.standard_normal(V)
    return w[:, None], b


def interior_tokens(w: Any) -> np.ndarray:
    """For D = 1 without a bias: the tokens that can never be the strict argmax, those whose
    weight lies strictly between the smallest and the largest."""
    w = np.asarray(w, dtype=np.float64).ravel()
    return np.flatnonzero((w > w.min()) & (w < w.max()))


#: Where the bounded minimisation of :func:`d1_top1_range` stops, relative to the interval's scale: a
#: search tolerance, not a verdict's (the range carries no certificate).
D1_XATOL = 1e-14
#: Theorem EX.3 (4): the top-1 probability a token must reach as the strict argmax ...
EX3_HIGH = Fraction(3, 4)


def ex3_low(V: int) -> Fraction:
    """... and the one it must come down to, :math:`1/V + 1/(4V^2)` (Theorem EX.3 (4))."""
    V = check_integer_in(V, "V", 2, 1 << 24)
    return Fraction(1, V) + Fraction(1, 4 * V * V)


def _d1_head(w: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """A D = 1 head as two float64 vectors: weights (V, or V x 1) and biases (V; None or 0: no bias)."""
    w = as_real_array(w, "w").astype(np.float64)
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    if w.ndim != 1 or len(w) < 2:
        raise InputError(f"w: expected V >= 2 weights of a D = 1 head, got shape {w.shape}")
    b = np.zeros_like(w) if b is None else as_real_array(b, "b").astype(np.float64).ravel()
    if b.shape != w.shape:
        raise InputError(f"b: shape {b.shape}, expected one bias per weight {w.shape}")
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(b))):
        raise InputError("w, b: every weight and bias must be finite")
    return w, b


def d1_argmax_interval(w: Any, b: Any, t: int) -> tuple[Fraction | None, Fraction | None] | None:
    r"""The open interval of h where token t is the strict argmax of :math:`z(h) = wh + b` (D = 1),
    computed exactly from the floats: ``(lo, hi)`` (None for an infinite end), or None when it is
    empty. Each rival x asks :math:`(w_t - w_x)h > b_x - b_t`: a lower end if :math:`w_t > w_x`, an
    upper end if :math:`w_t < w_x`, and :math:`b_t > b_x` if the weights are equal."""
    w, b = _d1_head(w, b)
    t = check_integer_in(t, "t", 0, len(w) - 1)
    lo: Fraction | None = None
    hi: Fraction | None = None
    wt, bt = Fraction(w[t]), Fraction(b[t])
    for x in range(len(w)):
        if x == t:
            continue
        slope, gap = wt - Fraction(w[x]), Fraction(b[x]) - bt
        if slope == 0:
            if gap >= 0:
                return None
        elif slope > 0:
            lo = gap / slope if lo is None else max(lo, gap / slope)
        else:
            hi = gap / slope if hi is None else min(hi, gap / slope)
    if lo is not None and hi is not None and lo >= hi:
        return None
    return lo, hi


def _gap_lse(w: np.ndarray, b: np.ndarray, t: int, h: float) -> float:
    r""":math:`\varphi(h) = \log\sum_x e^{z_x(h) - z_t(h)} = -\log p_t(h)`, convex in h."""
    d = (w - w[t]) * h + (b - b[t])
    top = d.max()
    return float(top + np.log(np.exp(d - top).sum()))


def _gap_lse_limit(w: np.ndarray, b: np.ndarray, t: int) -> float:
    r""":math:`\lim \varphi(h)` at an infinite end of t's interval (no rival's logit grows faster than t's
    that way): the rivals of t's weight keep their bias gap, the others vanish."""
    tied = w == w[t]
    return float(np.log(np.exp(b[tied] - b[t]).sum()))


def d1_top1_range(w: Any, b: Any, t: int) -> tuple[float, float] | None:
    r"""``(inf, sup)`` of token t's top-1 probability :math:`p_t(h)` over the h where t is the strict
    argmax (:func:`d1_argmax_interval`), a D = 1 head with biases b (None: no bias); None if t never wins.

    :math:`-\log p_t = arphi(h) = \log\sum_x e^{z_x(h) - z_t(h)}` is a log-sum-exp of affine functions,
    so convex: :math:`p_t` is log-concave on the interval, its infimum is its limit at one of the two
    ends, and its supremum is :math:`e^{-\minarphi}`, found by a bounded scalar minimisation on a
    finite interval. On an interval unbounded above, no rival has a larger weight, so
    :math:`arphi' = \sum_x s_x(w_x - w_t) \le 0` and the supremum is the limit at
    :math:`+\infty` (likewise below). Float64, no certificate: the ends are evaluated at the exact
    interval's float values."""
    import scipy.optimize

    interval = d1_argmax_interval(w, b, t)
    if interval is None:
        return None
    w, b = _d1_head(w, b)
    lo, hi = interval
    ends = [_gap_lse_limit(w, b, t) if end is None else _gap_lse(w, b, t, float(end)) for end in (lo, hi)]
    if hi is None:
        low_point = ends[1]
    elif lo is None:
        low_point = ends[0]
    else:
        found = scipy.optimize.minimize_scalar(
            lambda h: _gap_lse(w, b, t, h),
            bounds=(float(lo), float(hi)),
            method="bounded",
            options={"xatol": D1_XATOL * max(1.0, abs(float(lo)), abs(float(hi)))},
        )
        low_point = min(float(found.fun), *ends)
    return math.exp(-max(ends)), math.exp(-low_point)


def d1_tokens_reaching(w: Any, b: Any, high: float, low: float) -> np.ndarray:
    """The tokens of a D = 1 head whose top-1 probability, as the strict argmax, reaches both some
    value >= ``high`` and some value <= ``low`` (by :func:`d1_top1_range`; float64, no certificate).
    Theorem EX.3 (4): with ``high`` = 3/4 and ``low`` = 1/V + 1/(4V²), at most the two tokens of the
    extreme weights."""
    w, b = _d1_head(w, b)
    found = []
    for t in range(len(w)):
        reach = d1_top1_range(w, b, t)
        if reach is not None and reach[1] >= high and reach[0] <= low:
            found.append(t)
    return np.array(found, dtype=np.int64)


# --------------------------------------------------------------------------- argmaxable tokens

#: Scales at which the certificate h = s w_i is tried (a larger s drowns the bias).
CHEAP_SCALES = (1.0, 10.0, 1000.0)
#: Reflections of h across the tie with the current winner before the LP is tried.
REFLECTION_STEPS = 32
#: Relative amount by which a reflection overshoots the exact mirror image of the deficit.
REFLECTION_NUDGE = 1e-12
#: Competitors added to the cutting-plane LP per round.
LP_CUTS = 64
#: Supports tried for one convex-combination certificate: each retry drops the rows whose exact
#: weight came out negative (the float LP put the token on a face that it lies just outside), or the
#: lightest row when the support's exact equations have no solution.
COMBINATION_ATTEMPTS = 4
#: Logits evaluated per block when certificates are checked in batches (V x block doubles).
BLOCK_ENTRIES = 1 << 24
#: The smallest positive float64: no product that underflows is off by more.
SMALLEST_SUBNORMAL = 2.0**-1074


def _validated_head(W: Any, bias: Any) -> tuple[np.ndarray, np.ndarray]:
    """W and b as float64 once they are real numbers: booleans (a mask, not weights), complex numbers
    (whose imaginary part a cast would drop) and strings are refused by name, as ``load_head`` refuses
    them in files, so a head answers the same from memory and from disk."""
    W = as_real_array(W, "W")
    if W.ndim != 2 or W.shape[0] < 2 or W.shape[1] < 1:
        raise InputError(f"W: expected a (V x D) head with V >= 2 and D >= 1, got shape {W.shape}")
    if not np.all(np.isfinite(W)):
        raise InputError("W: non-finite value")
    b = np.zeros(W.shape[0]) if bias is None else as_real_array(bias, "bias")
    if b.shape != (W.shape[0],):
        raise InputError(f"bias: shape {b.shape} does not match the {W.shape[0]} rows of W")
    if not np.all(np.isfinite(b)):
        raise InputError("bias: non-finite value")
    return W, b


def _norms(X: np.ndarray) -> np.ndarray:
    """Euclidean norms of the rows of X, as m ||x/m|| with m = max|x| so that no square under- or
    overflows."""
    top = np.abs(X).max(axis=1)
    return top * np.linalg.norm(X / np.where(top > 0, top, 1.0)[:, None], axis=1)


def dyadic(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Python integers n (an object array shaped like x) and one exponent e with x = n 2^e exactly:
    every float is a 53-bit integer times a power of two."""
    mantissa, exponent = np.frexp(x)
    digits = (mantissa * 2.0**53).astype(np.int64)
    shift = exponent.astype(np.int64) - 53
    nonzero = digits != 0
    low = int(shift[nonzero].min()) if np.any(nonzero) else 0
    shifts = np.where(nonzero, shift - low, 0).ravel().tolist()
    ints = [n << s for n, s in zip(digits.ravel().tolist(), shifts, strict=True)]
    return np.array(ints, dtype=object).reshape(x.shape), low


@dataclass(frozen=True, eq=False)
class Head:
    r"""A head ready for certificates: W (V x D) and b as float64, both multiplied by the power of two
    that brings max|W| into [1, 2) when that scaling is exact (it multiplies every logit by the
    same power, so an h or a :math:`\lambda` certifies the same tokens for the scaled head as for the
    given one, and the floating-point search sees one scale whatever the head's), with the rows'
    Euclidean norms."""

    W: np.ndarray
    b: np.ndarray
    norms: np.ndarray

    @classmethod
    def of(cls, W: Any, bias: Any = None) -> Head:
        """Validate (W, b) and scale both by 2^k when that is exact."""
        W, b = _validated_head(W, bias)
        top = max(float(W.max()), -float(W.min()))
        k = 1 - int(np.frexp(top)[1]) if top > 0 else 0
        if k:
            scaled_W, scaled_b = np.ldexp(W, k), np.ldexp(b, k)
            rows = max(1, BLOCK_ENTRIES // W.shape[1])
            exact = np.array_equal(np.ldexp(scaled_b, -k), b) and all(
                np.array_equal(np.ldexp(scaled_W[i : i + rows], -k), W[i : i + rows]) for i in range(0, len(W), rows)
            )
            if exact:
                W, b = scaled_W, scaled_b
        return cls(W, b, _norms(W))

    def logits(self, H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""The computed logits W h + b (V x n) for the rows h of H, and a rigorous bound on their
        error. A logit is a sum of D + 1 rounded terms, so in any order, fused or not, it is within
        :math:`\gamma_{D+1}(\sum_k |w_{jk} h_k| + |b_j|) \le \gamma_{D+1}(\|w_j\|\|h\| + |b_j|)` of the
        exact value (Higham eq. 3.5). The bound takes :math:`\gamma_{2D+16}`, which leaves room for
        the roundings of the norms, of the bound itself and of the comparisons made with it, plus
        (D + 2) times the smallest subnormal for products that underflow."""
        D = self.W.shape[1]
        z = self.W @ H.T + self.b[:, None]
        error = np.multiply.outer(self.norms, _norms(H))
        error += np.abs(self.b)[:, None]
        error *= gamma(2 * D + 16, unit_roundoff(np.float64))
        error += (D + 2) * SMALLEST_SUBNORMAL
        return z, error

    def winners(self, H: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """For each row k of H, whether ``tokens[k]`` is the strict argmax of W h_k + b, exactly.

        The float logits with their rounding bound (:meth:`logits`) settle every rival whose interval
        lies wholly below the token's, or a rival wholly above it; the rivals whose intervals overlap
        the token's are compared again in exact integer arithmetic (:func:`wins_exactly`). A column
        whose float logits overflow is not certified."""
        V = self.W.shape[0]
        wins = np.zeros(len(tokens), dtype=bool)
        block = max(1, BLOCK_ENTRIES // V)
        for start in range(0, len(tokens), block):
            own, h = tokens[start : start + block], H[start : start + block]
            z, error = self.logits(h)
            columns = np.arange(len(own))
            low_own = z[own, columns] - error[own, columns]
            high_own = z[own, columns] + error[own, columns]
            z[own, columns] = -np.inf
            z += error  # the rivals' upper bounds
            top = z.max(axis=0)
            certain = low_own > top
            wins[start : start + block] = certain
            unsure = np.flatnonzero(~certain & np.isfinite(top) & np.isfinite(low_own) & np.isfinite(high_own))
            if len(unsure) == 0:
                continue
            beaten = (z[:, unsure] - 2 * error[:, unsure]).max(axis=0) > high_own[unsure]
            for k in unsure[~beaten]:
                rivals = np.flatnonzero(z[:, k] >= low_own[k])
                rivals = rivals[np.argsort(-z[rivals, k], kind="stable")]  # the likeliest winner first
                own_k = int(own[k])
                wins[start + k] = wins_exactly(self, h[k], own_k, rivals[:1]) and wins_exactly(
                    self, h[k], own_k, rivals
                )
        return wins


def wins_exactly(head: Head, h: np.ndarray, token: int, rivals: np.ndarray) -> bool:
    r"""Whether :math:`w_i \cdot h + b_i > w_j \cdot h + b_j` for every rival j, in exact integer
    arithmetic: with one exponent for the rows, one for h and one for the biases, every logit is an
    integer times :math:`2^{e_W + e_h}` plus an integer times :math:`2^{e_b}`."""
    rows = np.r_[token, rivals].astype(np.int64)
    W, e_W = dyadic(head.W[rows])
    h_int, e_h = dyadic(h)
    b, e_b = dyadic(head.b[rows])
    low = min(e_W + e_h, e_b)
    z = (W @ h_int) * (1 << (e_W + e_h - low)) + b * (1 << (e_b - low))
    return bool(np.all(z[0] > z[1:]))


def strict_winner(head: Head, h: np.ndarray, token: int) -> bool:
    """Whether ``token`` is the strict argmax of W h + b, exactly (see :meth:`Head.winners`)."""
    return bool(head.winners(h[None, :], np.array([token]))[0])


def duplicate_losers(W: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tokens that can never win outright because another token, their twin, has the same row and a
    bias at least as large: their logits tie or lose for every h (exact float comparisons, the
    certificate :math:`\\lambda = e_{twin}`). Returns the losers, sorted, and their twins."""
    _, group = np.unique(W, axis=0, return_inverse=True)
    order = np.lexsort((-b, group.ravel()))  # by row, then by bias from the largest down
    g, bias = group.ravel()[order], b[order]
    first = np.r_[True, g[1:] != g[:-1]]
    tied_with_next = np.r_[(g[1:] == g[:-1]) & (bias[1:] == bias[:-1]), False]
    loses = ~first | tied_with_next
    leader = order[np.maximum.accumulate(np.where(first, np.arange(len(g)), 0))]  # each group's largest bias
    twin = np.where(first, np.r_[order[1:], 0], leader)  # the leader itself ties with the next row
    losers, twins = order[loses], twin[loses]
    sorted_ = np.argsort(losers)
    return losers[sorted_], twins[sorted_]


def whitening(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean row and the pseudo-inverse of the rows' covariance."""
    mean = W.mean(axis=0)
    covariance = np.zeros((W.shape[1], W.shape[1]))
    rows = max(1, BLOCK_ENTRIES // W.shape[1])
    for start in range(0, len(W), rows):  # in blocks: no centred copy of W
        centred = W[start : start + rows] - mean
        covariance += centred.T @ centred
    values, vectors = np.linalg.eigh(covariance / len(W))
    keep = values > values.max() * W.shape[1] * 2.0**-52
    return mean, (vectors[:, keep] / values[keep]) @ vectors[:, keep].T


def whitened_directions(W: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    r"""Candidates :math:`h_i = C^+ (w_i - \bar w)`, C the covariance of the rows: in whitened
    coordinates :math:`x = C^{+/2}(w - \bar w)` this is :math:`h = x_i`, whose logit
    :math:`\|x_i\|^2` beats :math:`x_j \cdot x_i` unless x_j lies near x_i's direction with a larger
    norm. Shifting every row by the mean moves every logit by the same amount."""
    mean, inverse = whitening(W)
    return (W[tokens] - mean) @ inverse


def reflect_toward_winner(head: Head, h: np.ndarray, token: int, steps: int) -> np.ndarray | None:
    r"""Reflect h across the tie hyperplane between ``token`` and the current winner j,
    :math:`h \leftarrow h + 2 (z_j - z_i) (w_i - w_j) / \|w_i - w_j\|^2`, which turns i's deficit to
    j into the same lead; stop when i wins (exactly). Returns h, or None."""
    W, b = head.W, head.b
    for _ in range(steps):
        if strict_winner(head, h, token):
            return h
        z = W @ h + b
        z[token] = -np.inf
        j = int(np.argmax(z))
        direction = W[token] - W[j]
        if not np.any(direction):
            return None
        deficit = z[j] - (W[token] @ h + b[token])
        deficit += REFLECTION_NUDGE * (1 + abs(z[j]))  # land just past the mirror image, not on a tie
        h = h + 2 * deficit / (direction @ direction) * direction
    return h if strict_winner(head, h, token) else None


def _scaled_differences(head: Head, token: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(w_j - w_i)/σ_w and (b_j - b_i)/σ_b for the given rows, σ the largest magnitude of each (1 where
    all are zero): the LPs see the same numbers whatever the scale or offset of the head."""
    dW = head.W[rows] - head.W[token]
    db = head.b[rows] - head.b[token]
    scale_W = float(np.abs(dW).max()) or 1.0
    scale_b = float(np.abs(db).max()) or 1.0
    return dW / scale_W, db / scale_b, scale_W, scale_b


def argmax_lp(head: Head, token: int, competitors: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """The margin LP for one token, solved with HiGHS on the differences to the token's row and bias,
    each scaled to largest magnitude 1: maximise delta over (h, s, delta) with
    (w_j - w_i) h / σ_w + (b_j - b_i) s / σ_b + delta <= 0 for the competitors j (all other tokens by
    default), h in [-1, 1]^D, s in [0, 1], delta <= 1. A positive delta proposes an h that beats those
    competitors (at h σ_b / (σ_w s), or for s = 0 far enough along h to pass every bias gap); a
    margin of 0 is matched by a convex combination in the dual. Either is only a proposal, to be
    certified exactly. Returns delta and the candidate h."""
    from scipy.optimize import linprog

    W, b = head.W, head.b
    V, D = W.shape
    others = np.delete(np.arange(V), token) if competitors is None else competitors
    dW, db, scale_W, scale_b = _scaled_differences(head, token, others)
    A = np.hstack([dW, db[:, None], np.ones((len(others), 1))])
    cost = np.zeros(D + 2)
    cost[-1] = -1.0
    bounds = [(-1.0, 1.0)] * D + [(0.0, 1.0), (None, 1.0)]
    result = linprog(cost, A_ub=A, b_ub=np.zeros(len(others)), bounds=bounds, method="highs")
    if result.status != 0:
        raise ArithmeticError(f"argmax LP for token {token}: {result.message}")
    h, s = result.x[:D], result.x[D]
    if s > 0:
        return float(-result.fun), h * (scale_b / (scale_W * s))
    # A direction at infinity: scale it past every bias gap, t (w_i - w_j) h > b_j - b_i.
    gains = (W[token] - W) @ h
    gaps = b - b[token]
    needed = np.max(np.where(gains > 0, gaps / np.where(gains > 0, gains, 1.0), 0.0), initial=0.0)
    return float(-result.fun), h * (2 * needed + 1)


def cutting_plane_lp(head: Head, token: int, h: np.ndarray) -> tuple[float, np.ndarray | None, np.ndarray]:
    """Look for a winning h with the margin LP over a growing set of competitors: start from the
    ``LP_CUTS`` strongest at h, and while the LP proposes an h (positive margin) that does not win
    exactly, add the strongest rows that beat or may beat the token there. Stops when the LP's answer
    wins exactly (whatever its margin), at a margin <= 0, or when no new row threatens the answer.
    Returns the last margin, the winning h (None if none was certified) and the competitors, where a
    convex combination is looked for next."""
    W, b = head.W, head.b

    def strongest(z: np.ndarray, exclude: np.ndarray) -> np.ndarray:
        z[token] = -np.inf
        z[exclude] = -np.inf
        top = np.argsort(-z)[:LP_CUTS]
        return top[np.isfinite(z[top])]

    competitors = strongest(W @ h + b, np.array([], dtype=np.int64))
    while True:
        delta, candidate = argmax_lp(head, token, competitors)
        if strict_winner(head, candidate, token):  # checked whatever the margin: HiGHS reads tiny ones as 0
            return delta, candidate, competitors
        if delta <= 0:
            return delta, None, competitors
        z, error = head.logits(candidate[None, :])
        z, error = z[:, 0], error[:, 0]
        threat = z + error >= z[token] - error[token]
        added = strongest(np.where(threat, z, -np.inf), competitors)
        if len(added) == 0:  # the LP's answer loses only to competitors already constrained
            return delta, None, competitors
        competitors = np.concatenate([competitors, added])


def combination_lp(head: Head, token: int, candidates: np.ndarray) -> np.ndarray:
    r"""The candidates carrying weight in a basic solution (HiGHS dual simplex) of: maximise
    :math:`\sum_j \lambda_j (b_j - b_i)/\sigma_b` subject to
    :math:`\sum_j \lambda_j (w_j - w_i)/\sigma_w = 0`, :math:`\sum_j \lambda_j = 1`,
    :math:`\lambda \ge 0`. A basic solution has at most D + 1 positive weights (Carathéodory).
    Heaviest first; empty when the LP is infeasible."""
    from scipy.optimize import linprog

    dW, db, _, _ = _scaled_differences(head, token, candidates)
    A = np.vstack([dW.T, np.ones(len(candidates))])
    rhs = np.r_[np.zeros(head.W.shape[1]), 1.0]
    result = linprog(-db, A_eq=A, b_eq=rhs, bounds=(0, None), method="highs-ds")
    if result.status != 0:
        return np.array([], dtype=np.int64)
    order = np.argsort(-result.x, kind="stable")
    return candidates[order[result.x[order] > 0]]


def exact_weights(head: Head, token: int, support: np.ndarray) -> list[Fraction] | None:
    r"""Weights :math:`\lambda` on ``support`` with :math:`\sum_j \lambda_j w_j = w_i` and
    :math:`\sum_j \lambda_j = 1`, solved in rationals (python-flint ``fmpq_mat.rref``: the first
    independent rows of the support take the weight, the others 0) and checked by substituting back in
    integers. None when no weights on the support solve the D + 1 equations."""
    from flint import fmpq_mat

    k = len(support)
    rows, _ = dyadic(head.W[np.r_[support, token].astype(np.int64)])  # one exponent: the equations scale by it
    system = [*rows.T.tolist(), [1] * (k + 1)]
    reduced, rank = fmpq_mat(system).rref()
    weights = [Fraction(0)] * k
    for r in range(rank):
        pivot = next(c for c in range(k + 1) if reduced[r, c] != 0)
        if pivot == k:  # the right-hand side is independent of the support's columns
            return None
        entry = reduced[r, k]
        weights[pivot] = Fraction(int(entry.p), int(entry.q))
    common = math.lcm(*(w.denominator for w in weights))
    numerators = [w.numerator * (common // w.denominator) for w in weights]
    solved = all(sum(n * a for n, a in zip(numerators, row[:k], strict=True)) == common * row[k] for row in system)
    return weights if solved else None


def never_certificate(head: Head, token: int, candidates: np.ndarray) -> tuple[np.ndarray, tuple[Fraction, ...]] | None:
    r"""A certificate that ``token`` never wins: rows j of ``candidates`` and exact weights
    :math:`\lambda_j > 0` with :math:`\sum \lambda_j = 1`, :math:`\sum \lambda_j w_j = w_i` and
    :math:`\sum \lambda_j b_j \ge b_i`. Then for every h, :math:`z_i \le \sum_j \lambda_j z_j \le
    \max_j z_j`, so i is never the strict argmax. The support comes from :func:`combination_lp`, the
    weights from :func:`exact_weights`; a support that fails is retried without some of its rows
    (``COMBINATION_ATTEMPTS``). None when no certificate is found."""
    candidates = np.asarray(candidates, dtype=np.int64)
    for _ in range(COMBINATION_ATTEMPTS):
        support = combination_lp(head, token, candidates)
        if len(support) == 0:
            return None
        weights = exact_weights(head, token, support)
        if weights is None:
            drop = support[-1:]  # w_i is on the support's affine hull only to within rounding: look elsewhere
        elif any(w < 0 for w in weights):
            drop = support[[w < 0 for w in weights]]
        else:
            used = [w > 0 for w in weights]
            support, positive = support[used], tuple(w for w in weights if w > 0)
            biases = sum(w * Fraction(float(head.b[j])) for w, j in zip(positive, support, strict=True))
            return (support, positive) if biases >= Fraction(float(head.b[token])) else None
        candidates = np.setdiff1d(candidates, drop)
    return None


# --------------------------------------------------------------------------- the hull route (low D)

#: Largest hidden size at which :func:`argmaxable` takes its candidates from qhull's convex hull. The
#: hull's facets grow like V^(D/2): at V = 2,000 Gaussian rows, measured (CPU seconds, two shared
#: cores): D = 6, 22,275 facets, qhull 0.14-0.3 s, the hull route 1.3 s, the general route 23 s;
#: D = 7, 152,902 facets, qhull 3.8 s, the hull route 6.5 s, the general route 24 s; D = 8,
#: 874,089 facets, qhull alone 38 s against 22 s for the general route.
HULL_MAX_D = 7
#: Entries of the (points x facets) arrays the hull route forms at once.
HULL_BLOCK_ENTRIES = 1 << 22
#: Relative size below which a singular value of the centred rows counts as zero when the hull
#: route chooses the affine subspace qhull runs in (only a choice of candidates: every answer is
#: certified exactly, and a wrong choice sends tokens to the general route).
HULL_FLAT_TOLERANCE = 1e-9
HULL_VERTEX = "hull vertex, re-checked"
CONVEX_COMBINATION = "convex combination"


@dataclass(frozen=True, eq=False)
class _HullProposals:
    """What qhull proposes for the open tokens: a hidden state for each token that looks like a
    vertex (``tokens``, ``H``), and for each that looks inside, rows of other tokens whose convex
    hull holds its row (``supports``: support tuple -> the tokens proposed on it)."""

    tokens: np.ndarray
    H: np.ndarray
    supports: dict[tuple[int, ...], list[int]]


def _affine_coordinates(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates of the rows of X in their affine hull (float: SVD of the centred rows, singular
    values above :data:`HULL_FLAT_TOLERANCE` of the largest), and the basis (columns) they are taken in."""
    centred = X - X.mean(axis=0)
    _, sigma, Vt = np.linalg.svd(centred, full_matrices=False)
    r = int(np.sum(sigma > HULL_FLAT_TOLERANCE * sigma[0])) if sigma.size and sigma[0] > 0 else 0
    return centred @ Vt[:r].T, Vt[:r].T


def _hull_proposals(head: Head, open_tokens: np.ndarray) -> _HullProposals | None:
    r"""qhull's proposals (:class:`_HullProposals`) for ``open_tokens``, each of which has a row no
    other token shares with a bias as large (duplicates are settled before). None when the rows'
    affine hull has dimension below 2 or qhull fails.

    Without a bias (or with a bias affine in the rows, which only shifts h): the hull of the rows in
    their affine hull; a vertex's proposal is the sum of the unit normals of its facets (a direction
    inside its normal cone), scaled past every bias gap; a row inside is proposed on the simplex of a
    fixed vertex :math:`v_0` and the facet that the ray from :math:`v_0` through it leaves by (the
    pulling triangulation from :math:`v_0`). With a bias: the hull of the lifted rows
    :math:`(w_j, b_j)`; a token wins exactly where its lifted row is a vertex of an upper facet (outward
    normal (a, c), c > 0, maximising :math:`a \cdot w + c b`, i.e. the logits at h = a/c); its proposal
    is h = a/c for (a, c) the sum of the unit normals of its upper facets plus a share of those of all
    its facets small enough to keep c > 0 (inside its normal cone); any other row is proposed on the
    upper facet above it, which gives :math:`\sum_j \lambda_j w_j = w_i` and
    :math:`\sum_j \lambda_j b_j \ge b_i`. Proposals only: :func:`argmaxable` certifies each exactly."""
    from scipy.spatial import ConvexHull, QhullError

    rows, group = np.unique(head.W, axis=0, return_inverse=True)
    group = group.ravel()
    order = np.lexsort((-head.b, group))  # by row, then by bias from the largest down
    first = np.r_[True, group[order][1:] != group[order][:-1]]
    leader = order[first]  # the token of each distinct row with the largest bias
    coordinates, basis = _affine_coordinates(rows)
    lifted = bool(np.any(head.b))
    if lifted:
        bias = head.b[leader]
        spread = float(np.abs(bias - bias.mean()).max()) or 1.0
        with_bias, _ = _affine_coordinates(np.hstack([coordinates, ((bias - bias.mean()) / spread)[:, None]]))
        lifted = with_bias.shape[1] > coordinates.shape[1]
        if lifted:
            coordinates = np.hstack([coordinates, ((bias - bias.mean()) / spread)[:, None]])
    r = coordinates.shape[1]
    if r < 2 or len(rows) <= r + 1:
        return None
    try:
        hull = ConvexHull(coordinates)
    except QhullError:
        return None
    simplices, normals, offsets = hull.simplices, hull.equations[:, :-1], hull.equations[:, -1]
    wanted = np.zeros(len(rows), dtype=bool)
    wanted[group[open_tokens]] = True
    every = _normal_sums(simplices, normals, len(rows))
    if lifted:
        upper = normals[:, -1] > 0
        simplices, normals, offsets = simplices[upper], normals[upper], offsets[upper]
        vertex = np.zeros(len(rows), dtype=bool)
        vertex[simplices.ravel()] = True
        proposed = vertex & wanted
        # Inside the normal cone of the lifted vertex, with a positive last component: the upper
        # facets' normals, plus as much of all its facets' as keeps that component positive.
        up, around = _normal_sums(simplices, normals, len(rows))[proposed], every[proposed]
        share, negative = np.ones(len(up)), around[:, -1] < 0
        share[negative] = np.minimum(1.0, 0.5 * up[negative, -1] / -around[negative, -1])
        direction = up + share[:, None] * around
        H = (spread * direction[:, :-1] / direction[:, -1:]) @ basis.T
    else:
        vertex = np.zeros(len(rows), dtype=bool)
        vertex[simplices.ravel()] = True
        proposed = vertex & wanted
        H = _past_bias_gaps(head, leader[proposed], every[proposed] @ basis.T)
    inside = np.flatnonzero(wanted & ~vertex)
    if lifted:
        supports = simplices[_facet_above(coordinates[inside], normals, offsets)]
    else:
        supports = _pulling_supports(coordinates, inside, np.flatnonzero(vertex)[0], simplices, normals, offsets)
    found = supports[:, 0] >= 0
    supports = np.sort(leader[supports[found]], axis=1)  # as token ids
    if len(supports) == 0:
        return _HullProposals(tokens=leader[proposed], H=H, supports={})
    distinct, which = np.unique(supports, axis=0, return_inverse=True)
    members = leader[inside[found]]
    order = np.argsort(which.ravel(), kind="stable")
    bounds = np.searchsorted(which.ravel()[order], np.arange(len(distinct) + 1))
    on_support = {
        tuple(distinct[g].tolist()): members[order[bounds[g] : bounds[g + 1]]].tolist() for g in range(len(distinct))
    }
    return _HullProposals(tokens=leader[proposed], H=H, supports=on_support)


def _normal_sums(simplices: np.ndarray, normals: np.ndarray, points: int) -> np.ndarray:
    """Per point, the sum of the unit outward normals of the facets through it (a direction inside
    the point's normal cone when those facets span it)."""
    sums = np.zeros((points, normals.shape[1]))
    np.add.at(sums, simplices.ravel(), np.repeat(normals, simplices.shape[1], axis=0))
    return sums


def _past_bias_gaps(head: Head, tokens: np.ndarray, directions: np.ndarray) -> np.ndarray:
    r"""Each direction d (a row) scaled by t so that t (w_i - w_j) \cdot d > b_j - b_i wherever the
    gain :math:`(w_i - w_j) \cdot d` is positive (t = 1 without a bias): a direction that exposes
    :math:`w_i` alone wins once it is long enough."""
    if not np.any(head.b):
        return directions
    out = directions.copy()
    block = max(1, HULL_BLOCK_ENTRIES // head.W.shape[0])
    for start in range(0, len(tokens), block):
        own, d = tokens[start : start + block], directions[start : start + block]
        gains = np.einsum("ij,ij->i", head.W[own], d)[None, :] - head.W @ d.T  # V x n
        gaps = head.b[:, None] - head.b[own][None, :]
        positive = gains > 0
        needed = np.max(np.where(positive, gaps / np.where(positive, gains, 1.0), 0.0), axis=0, initial=0.0)
        out[start : start + block] *= (2 * needed + 1)[:, None]
    return out


def _facet_above(points: np.ndarray, normals: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """For each lifted point (x, y), the upper facet whose hyperplane is lowest above x: the upper
    hull is the minimum of its facets' affine functions :math:`y = -(\\text{offset} + a \\cdot x)/c`."""
    found = np.empty(len(points), dtype=np.int64)
    block = max(1, HULL_BLOCK_ENTRIES // max(1, len(normals)))
    for start in range(0, len(points), block):
        x = points[start : start + block, :-1]
        heights = -(offsets[None, :] + x @ normals[:, :-1].T) / normals[:, -1][None, :]
        found[start : start + block] = np.argmin(heights, axis=1)
    return found


def _pulling_supports(
    coordinates: np.ndarray,
    inside: np.ndarray,
    apex: int,
    simplices: np.ndarray,
    normals: np.ndarray,
    offsets: np.ndarray,
) -> np.ndarray:
    r"""For each point of ``inside``, the simplex of the pulling triangulation from the vertex ``apex``
    that holds it (a row: the apex, then the facet's vertices; -1 throughout for a point on the apex):
    the facet, of those not through the apex, by which the ray from the apex through the point leaves
    the hull, at the least :math:`t > 0` with :math:`n \cdot (x_0 + t (x - x_0)) = -\text{offset}`, i.e.
    the largest :math:`n \cdot (x - x_0) / (-\text{offset} - n \cdot x_0)`."""
    away = ~np.any(simplices == apex, axis=1)
    simplices, normals, offsets = simplices[away], normals[away], offsets[away]
    apex_point = coordinates[apex]
    reach = -offsets - normals @ apex_point  # > 0 for the facets not through the apex
    # 1/t per unit of the ray (the least t is the largest rate); a facet the rounding puts on the apex's
    # plane gets rate 0, and a point that only such facets could hold is left to the general route
    rates = np.where(reach[:, None] > 0, normals / np.where(reach > 0, reach, 1.0)[:, None], 0.0)
    supports = np.full((len(inside), simplices.shape[1] + 1), -1, dtype=np.int64)
    block = max(1, HULL_BLOCK_ENTRIES // max(1, len(normals)))
    for start in range(0, len(inside), block):
        speed = (coordinates[inside[start : start + block]] - apex_point) @ rates.T  # n x facets
        exit_facet = np.argmax(speed, axis=1)
        found = speed[np.arange(len(exit_facet)), exit_facet] > 0
        rows = np.flatnonzero(found) + start
        supports[rows, 0] = apex
        supports[rows, 1:] = simplices[exit_facet[found]]
    return supports


def _adjugate(system: np.ndarray, D: int) -> tuple[np.ndarray, np.ndarray, int]:
    """For a support's equations (an integer object array, (D + 1) x k, k <= D + 1): k of its rows
    that are independent (all of them when k = D + 1, else chosen by a pivoted QR in floats), the
    integer adjugate of that k x k block and its determinant (python-flint; 0 when singular)."""
    from flint import fmpz_mat

    k = system.shape[1]
    if k == D + 1:
        chosen = np.arange(k)
    else:  # the support spans a proper affine subspace: k of the D + 1 equations
        import scipy.linalg

        chosen = np.sort(scipy.linalg.qr(system.astype(np.float64).T, mode="r", pivoting=True)[1][:k])
    square = fmpz_mat(system[chosen].tolist())
    determinant = int(square.det())
    if determinant == 0:
        return chosen, np.zeros((k, k), dtype=object), 0
    adjugate = [[int(x) for x in row] for row in (square.inv() * determinant).tolist()]
    return chosen, np.array(adjugate, dtype=object), determinant


def _hull_never(
    head: Head, supports: dict[tuple[int, ...], list[int]]
) -> dict[int, tuple[np.ndarray, tuple[Fraction, ...]]]:
    r"""Exact certificates for the tokens qhull proposes inside (:func:`never_certificate`'s): weights
    :math:`\lambda` over the proposed support with :math:`\sum_j \lambda_j w_j = w_i` and
    :math:`\sum_j \lambda_j = 1`, every :math:`\lambda_j \ge 0` and :math:`\sum_j \lambda_j b_j \ge b_i`,
    in exact arithmetic; tokens whose weights fail are left out (to the general route).

    With S the support's equations (a column :math:`(w_j, 1)` per row j, integers over one power of two
    shared by all rows, :func:`dyadic`) and x the token's: :math:`\lambda = \operatorname{adj}(S)\,x /
    \det S` (python-flint's exact determinant and inverse, once per support), then for all tokens at once
    in Python integers the products, their substitution back into all D + 1 equations (compared
    exactly), the signs and the bias condition; the weights become Fractions."""
    never: dict[int, tuple[np.ndarray, tuple[Fraction, ...]]] = {}
    D = head.W.shape[1]
    by_size: dict[int, list[tuple[tuple[int, ...], list[int]]]] = {}
    for support, tokens in supports.items():
        by_size.setdefault(len(support), []).append((support, tokens))
    if not supports:
        return never
    involved = np.unique(np.r_[[j for s in supports for j in s], *supports.values()])
    integers = np.hstack([dyadic(head.W[involved])[0], np.ones((len(involved), 1), dtype=object)])
    biases = np.array([Fraction(float(x)) for x in head.b[involved]], dtype=object) if np.any(head.b) else None
    for k, groups in by_size.items():
        rows = np.array([support for support, _ in groups], dtype=np.int64)  # G x k
        systems = integers[np.searchsorted(involved, rows)].transpose(0, 2, 1)  # G x (D + 1) x k
        solved = [_adjugate(system, D) for system in systems]
        chosen = np.array([c for c, _, _ in solved])
        adjugates = np.array([a for _, a, _ in solved], dtype=object).reshape(len(groups), k, k)
        determinants = np.array([d for _, _, d in solved], dtype=object)
        group = np.concatenate([np.full(len(tokens), g) for g, (_, tokens) in enumerate(groups)])
        tokens = np.concatenate([tokens for _, tokens in groups])
        x = integers[np.searchsorted(involved, tokens)]  # T x (D + 1)
        picked = np.take_along_axis(x, chosen[group], axis=1)  # T x k
        numerators = np.matmul(adjugates[group], picked[:, :, None])[:, :, 0]  # the weights times det
        det = determinants[group]
        substituted = np.matmul(systems[group], numerators[:, :, None])[:, :, 0]
        exact = np.all(substituted == x * det[:, None], axis=1) & (det != 0)
        flip = det < 0
        numerators[flip], det[flip] = -numerators[flip], -det[flip]
        certified = exact & np.all(numerators >= 0, axis=1)
        if biases is not None:
            mixed = np.sum(numerators * biases[np.searchsorted(involved, rows[group])], axis=1)
            certified &= (mixed >= biases[np.searchsorted(involved, tokens)] * det).astype(bool)
        shared = [np.array(support, dtype=np.int64) for support, _ in groups]
        for array in shared:
            array.flags.writeable = False  # shared by the certificates of a support
        for t in np.flatnonzero(certified):
            weights, d, support = numerators[t].tolist(), det[t], shared[group[t]]
            used = support if all(weights) else support[[a > 0 for a in weights]]
            never[int(tokens[t])] = (used, tuple(Fraction(a, d) for a in weights if a))
    return never


def argmaxable(
    W: Any, bias: Any = None, *, tokens: Any = None, on_progress: Callable[[int], None] | None = None
) -> dict[str, Any]:
    r"""Decide for every token whether some h makes it the strict argmax of W h + b, with a
    certificate either way, or leave it undecided.

    *Argmaxable*: an h with :math:`(w_i - w_j) \cdot h + (b_i - b_j) > 0` for all j, checked exactly:
    float logits with a rigorous rounding bound settle the rivals far from the token, and the rivals
    within the bound are compared in exact integer arithmetic (:meth:`Head.winners`). *Never*: convex
    weights :math:`\lambda` over the other rows with :math:`\sum \lambda_j w_j = w_i` and
    :math:`\sum \lambda_j b_j \ge b_i`, solved and checked in exact rationals
    (:func:`never_certificate`), or a duplicate row with a bias at least as large
    (:math:`\lambda = e_j`). Both are statements about the float inputs read as exact rationals, so
    no threshold enters and the answer does not change when the head is scaled or shifted (beyond
    the rounding of doing so).

    At low dimension (D <= :data:`HULL_MAX_D`) qhull's convex hull of the rows (of the rows lifted by
    their biases) proposes first (:func:`_hull_proposals`): a direction inside each vertex's normal
    cone, re-checked as any h is (with a bias, after the small h below), and for each row inside a
    simplex of other rows holding it, whose exact weights are solved and checked in integers
    (:func:`_hull_never`). Whatever the hull does not settle (a degenerate or mis-rounded hull, a
    token whose proposal fails its check) continues below. The h are then sought cheapest first: the
    whitened :math:`h = C^+(w_i - \bar w)`, then h = s w_i, in batches; reflections toward the
    current winner; the cutting-plane margin LP, whose sign only chooses which certificate to try
    next. ``tokens`` restricts the decisions to some token ids (all
    by default; the others are left with method ""). ``on_progress(n)`` is called as n more tokens
    are settled. Returns ``argmaxable`` and ``never`` (boolean, certified), ``method`` (how each
    token was settled), ``lp_margin`` (NaN where no LP ran), ``witness`` (a winning h per argmaxable
    token, NaN rows elsewhere) and ``combination`` (token -> (rows, exact weights) per never token).
    A token in neither set is undecided."""
    head = Head.of(W, bias)
    V, D = head.W.shape
    wanted = np.ones(V, dtype=bool)
    if tokens is not None:
        ids = np.asarray(tokens)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer) or np.any((ids < 0) | (ids >= V)):
            raise InputError(f"tokens: expected a 1-D array of token ids in [0, {V}), got {tokens!r:.60}")
        wanted[:] = False
        wanted[ids] = True
    progress = on_progress or (lambda n: None)
    method = np.full(V, "", dtype=object)
    margins = np.full(V, np.nan)
    decided = np.zeros(V, dtype=bool)
    witness = np.full((V, D), np.nan)
    combination: dict[int, tuple[np.ndarray, tuple[Fraction, ...]]] = {}
    losers, twins = duplicate_losers(head.W, head.b)
    for loser, twin in zip(losers, twins, strict=True):
        if wanted[loser]:
            combination[int(loser)] = (np.array([twin]), (Fraction(1),))
            method[loser] = "duplicate row"
    progress(len(combination))
    open_tokens = np.flatnonzero((method == "") & wanted)
    whitened = functools.cache(lambda: whitening(head.W))
    cheap = [("certificate whitened", lambda t: (head.W[t] - whitened()[0]) @ whitened()[1])]
    cheap += [(f"certificate h = {s:g} w_i", lambda t, s=s: s * head.W[t]) for s in CHEAP_SCALES]
    block = max(1, BLOCK_ENTRIES // V)

    def settle(tokens: np.ndarray, candidates: list[tuple[str, Callable[[np.ndarray], np.ndarray]]]) -> np.ndarray:
        """Try each candidate h on the tokens in batches; the tokens no candidate makes win."""
        for name, direction in candidates:
            still_open = []
            for start in range(0, len(tokens), block):
                chunk = tokens[start : start + block]
                H = direction(chunk)
                wins = head.winners(H, chunk)
                decided[chunk[wins]], witness[chunk[wins]], method[chunk[wins]] = True, H[wins], name
                progress(int(wins.sum()))
                still_open.append(chunk[~wins])
            tokens = np.concatenate(still_open) if still_open else tokens
        return tokens

    proposals = _hull_proposals(head, open_tokens) if D <= HULL_MAX_D and len(open_tokens) else None
    if proposals is not None:
        proposed = np.full((V, D), np.nan)
        proposed[proposals.tokens] = proposals.H
        # With a bias the small witnesses first: a bound on h (bounded_argmaxable) keeps them as they are.
        settle(proposals.tokens, [*(cheap if np.any(head.b) else []), (HULL_VERTEX, lambda t: proposed[t])])
        hull_never = _hull_never(head, proposals.supports)
        for token, certificate in hull_never.items():
            combination[token], method[token] = certificate, CONVEX_COMBINATION
        progress(len(hull_never))
        open_tokens = np.flatnonzero((method == "") & wanted)
    open_tokens = settle(open_tokens, cheap)
    mean, inverse = whitened() if len(open_tokens) else (None, None)
    starts = (head.W[open_tokens] - mean) @ inverse if len(open_tokens) else np.empty((0, D))
    others = np.arange(V)
    for token, start in zip(open_tokens, starts, strict=True):
        h = reflect_toward_winner(head, start, token, REFLECTION_STEPS)
        if h is not None:
            decided[token], witness[token], method[token] = True, h, "reflections"
        else:
            margins[token], h, competitors = cutting_plane_lp(head, token, start)
            if h is not None:
                decided[token], witness[token], method[token] = True, h, "LP, re-checked"
            else:
                certificate = never_certificate(head, token, competitors)
                if certificate is None and len(competitors) < V - 1:
                    certificate = never_certificate(head, token, others[others != token])
                if certificate is not None:
                    combination[int(token)], method[token] = certificate, "convex combination"
                else:
                    method[token] = "no certificate"
        progress(1)
    never = np.zeros(V, dtype=bool)
    never[list(combination)] = True
    return {
        "argmaxable": decided,
        "never": never,
        "method": method,
        "lp_margin": margins,
        "witness": witness,
        "combination": combination,
    }


def bounded_argmaxable(
    W: Any,
    bias: Any = None,
    *,
    region: Any,
    tokens: Any = None,
    on_progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    r""":func:`argmaxable` within a bound on h: a ball :math:`\lVert h\rVert_2 \le R` or a box
    :math:`|h_i| \le r_i` (:class:`rankwall.theory.orderings.Ball`, :class:`~rankwall.theory.orderings.Box`),
    the region a final norm layer confines h to.

    *Without a bias the bound changes nothing* (for any R > 0 or radii > 0): the logits are linear in h,
    so :math:`t h` with t > 0 has the same strict argmax as h, and a winning h scaled by a power of two
    into the region still wins (exactly: every logit is multiplied by the same power of two); a token that
    never wins anywhere never wins in the region. So each witness of :func:`argmaxable` is scaled by
    :math:`2^{-e}` into the region and re-checked exactly, and the never-tokens keep their certificates.
    *With a bias* the bound matters (a token may win only far out): a witness outside the region is
    replaced by the answer of :func:`rankwall.theory.orderings.decide_ordering` for the one-token
    ordering within the region, a winning h inside it or weights :math:`\lambda` with
    :math:`\sigma(\sum_j \lambda_j (w_i - w_j)) + \sum_j \lambda_j (b_i - b_j) \le 0` (σ the region's support
    function), checked exactly.

    Returns :func:`argmaxable`'s keys, decided within the region, with ``bounded`` (token ->
    (pairs, exact weights)) for the tokens that win somewhere but never within the bound."""
    from rankwall.theory import orderings as od

    if not isinstance(region, od.Ball | od.Box):
        raise InputError(f"region: expected a Ball or a Box, got {region!r:.60}")
    result = argmaxable(W, bias, tokens=tokens, on_progress=on_progress)
    head = Head.of(W, bias)
    if isinstance(region, od.Box):
        region.of_dimension(head.W.shape[1])
    argmaxable_tokens = np.flatnonzero(result["argmaxable"])
    outside = [t for t in argmaxable_tokens if not od.inside(region, result["witness"][t])]
    bounded: dict[int, tuple[tuple[tuple[int, int], ...], tuple[Fraction, ...]]] = {}
    method, witness, decided = result["method"].copy(), result["witness"].copy(), result["argmaxable"].copy()
    if not np.any(head.b):
        for t in outside:
            witness[t] = od.into_region(witness[t], region)
        block = max(1, BLOCK_ENTRIES // head.W.shape[0])
        for start in range(0, len(outside), block):
            chunk = np.array(outside[start : start + block], dtype=np.int64)
            wins = head.winners(witness[chunk], chunk)
            decided[chunk[~wins]] = False  # cannot happen (the scaling is exact); never claimed if it did
            for t in chunk:
                method[t] = f"{method[t]}, scaled into the bound" if decided[t] else "no certificate"
    else:
        whitened = whitening(head.W)
        for t in outside:
            answer = od.decide_ordering(head, (int(t),), region, whitened)
            decided[t] = answer.status == od.REALISABLE
            witness[t] = answer.witness if decided[t] else np.nan
            method[t] = f"within the bound: {answer.method}"
            if answer.status == od.UNREALISABLE:
                bounded[int(t)] = (answer.pairs, answer.weights)
    never = result["never"].copy()
    never[list(bounded)] = True
    return {**result, "argmaxable": decided, "never": never, "method": method, "witness": witness, "bounded": bounded}


# --------------------------------------------------------------------------- codes on the sphere


def sphere_code(V: int, D: int, seed: int = 0) -> np.ndarray:
    """V unit vectors in R^D spread over the sphere: the circle for D = 2, the Fibonacci lattice for
    D = 3 (minimal angle about 3.8/sqrt(V)), normalised Gaussian points for D >= 4."""
    V = check_integer_in(V, "V", 2, 1 << 24)
    D = check_integer_in(D, "D", 2, 1 << 12)
    if D == 2:
        return circle_head(V)
    if D == 3:
        k = np.arange(V) + 0.5
        polar = np.arccos(1 - 2 * k / V)
        azimuth = np.pi * (1 + 5**0.5) * k
        return np.stack([np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar), np.cos(polar)], axis=1)
    points = np.random.default_rng(check_integer_in(seed, "seed", 0)).standard_normal((V, D))
    return points / np.linalg.norm(points, axis=1, keepdims=True)


def code_witness(W: np.ndarray, targets: np.ndarray, probability: float) -> np.ndarray:
    """Hidden states :math:`h_c = r_c w_{t_c}` with top-1 probability ``probability`` for each target,
    on any code whose rows are unit vectors (by bisection on r; the top-1 probability
    :math:`1/\\sum_v e^{r(\\langle w_v, w_t\\rangle - 1)}` rises with r when t is the unique nearest)."""
    gaps = W[targets] @ W.T - 1.0  # (C, V), zero at the target
    low, high = np.zeros(len(targets)), np.ones(len(targets))
    top = lambda r: 1.0 / np.exp(r[:, None] * gaps).sum(axis=1)  # noqa: E731
    while np.any(top(high) < probability):
        high = np.where(top(high) < probability, 2 * high, high)
    for _ in range(RADIUS_STEPS):
        middle = (low + high) / 2
        below = top(middle) < probability
        low, high = np.where(below, middle, low), np.where(below, high, middle)
    return ((low + high) / 2)[:, None] * W[targets]


def surviving_share(H: np.ndarray, W: np.ndarray, targets: np.ndarray, dtype: Any) -> float:
    """Share of contexts whose target stays the strict argmax when H W^T is computed in ``dtype``
    (a torch dtype: float64, float32, bfloat16 or float16)."""
    import torch

    z = torch.tensor(H).to(dtype) @ torch.tensor(W).to(dtype).T
    strict = (z == z.max(dim=1, keepdim=True).values).sum(dim=1).numpy() == 1
    return float(((z.argmax(dim=1).numpy() == targets) & strict).mean())


def smallest_surviving_dimension(
    V: int, dtype: Any, *, probability: float = 0.5, contexts: int = 64, dimensions: Any = range(2, 17), seed: int = 0
) -> int | None:
    """The smallest D in ``dimensions`` whose sphere-code witness keeps every sampled target the
    strict argmax in ``dtype`` (None if none does)."""
    targets = np.random.default_rng(seed).integers(0, V, contexts)
    for D in dimensions:
        W = sphere_code(V, D, seed)
        if surviving_share(code_witness(W, targets, probability), W, targets, dtype) == 1.0:
            return int(D)
    return None
