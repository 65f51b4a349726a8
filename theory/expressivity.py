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
   :math:`w_v`: for V >= 3 a token with an interior :math:`w_v` is never the argmax. With a bias,
   D = 1 makes every token the argmax: the lines :math:`z_v(h) = w_v h - w_v^2/2` are tangent to
   the convex curve :math:`h^2/2`, so token v wins exactly near :math:`h = w_v`. (With one shared
   head, the reachable top-1 probabilities of a token are an interval set by the head, not all of
   (1/V, 1): D = 1 with a bias buys the argmax, not the full Prop. A.4.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from theory._validation import InputError, check_probability, check_size

#: Bisection steps for the circle radius after the bracket is found (2^-64 of the bracket: below
#: one ulp of r).
RADIUS_STEPS = 64


def kl_gap(P: Any, N_tilde: Any, f: Any) -> tuple[float, float]:
    """``(CE(P) - CE(Ñ), sum_c f_c KL(Ñ_c || P_c))``: the two sides of Gibbs' identity, with
    0 log 0 = 0. P must be positive wherever Ñ is."""
    P, N_tilde, f = (np.asarray(x, dtype=np.float64) for x in (P, N_tilde, f))
    if P.shape != N_tilde.shape or P.ndim != 2 or f.shape != (P.shape[0],):
        raise InputError(f"P: shape {P.shape}, Ñ {N_tilde.shape} and f {f.shape} do not fit together")
    if np.any(P < 0) or np.any(N_tilde < 0) or np.any(f < 0):
        raise InputError("P: probabilities and frequencies must be non-negative")
    support = N_tilde > 0
    if np.any(P[support] == 0):
        raise InputError("P: zero probability on an observed token (the cross-entropy is infinite)")
    logP = np.log(np.where(support, P, 1.0))
    logN = np.log(np.where(support, N_tilde, 1.0))
    ce_P = -np.sum(f[:, None] * N_tilde * logP)
    ce_N = -np.sum(f[:, None] * N_tilde * logN)
    kl = np.sum(f[:, None] * N_tilde * (logN - logP))
    return float(ce_P - ce_N), float(kl)


def circle_head(V: int, D: int = 2) -> np.ndarray:
    """W (V x D): rows :math:`(\\cos 2\\pi v/V, \\sin 2\\pi v/V, 0, \\dots)`."""
    V = check_size(V, "V", 2, 1 << 24)
    D = check_size(D, "D", 2, 1 << 16)
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
    V = check_size(V, "V", 2, 1 << 24)
    D = check_size(D, "D", 2, 1 << 16)
    eps = check_probability(eps, "eps", 0.0, 1.0, closed=False)
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
    V = check_size(V, "V", 2, 1 << 24)
    rng = np.random.default_rng(check_size(seed, "seed", 0))
    w = np.sort(rng.uniform(-1, 1, size=V))
    return w[:, None], -(w**2) / 2


def interior_tokens(w: Any) -> np.ndarray:
    """For D = 1 without a bias: the tokens that can never be the strict argmax, those whose
    weight lies strictly between the smallest and the largest."""
    w = np.asarray(w, dtype=np.float64).ravel()
    return np.flatnonzero((w > w.min()) & (w < w.max()))


# --------------------------------------------------------------------------- argmaxable tokens

#: Scales at which the certificate h = s w_i is tried (a larger s drowns the bias).
CHEAP_SCALES = (1.0, 10.0, 1000.0)
#: Reflections of h across the tie with the current winner before the LP is tried.
REFLECTION_STEPS = 32
#: Relative amount by which a reflection overshoots the exact mirror image of the deficit.
REFLECTION_NUDGE = 1e-12
#: Competitors added to the cutting-plane LP per round.
LP_CUTS = 64
#: An LP margin at or below this is read as "no h makes the token win" (HiGHS solves to a primal
#: feasibility tolerance of 1e-7 on rows of unit-scale coefficients; the margin variable is <= 1).
LP_MARGIN_FLOOR = 1e-9
#: Logits evaluated per block when certificates are checked in batches (V x block doubles).
BLOCK_ENTRIES = 1 << 24


def _validated_head(W: Any, bias: Any) -> tuple[np.ndarray, np.ndarray]:
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] < 2 or W.shape[1] < 1:
        raise InputError(f"W: expected a (V x D) head with V >= 2 and D >= 1, got shape {W.shape}")
    if not np.all(np.isfinite(W)):
        raise InputError("W: non-finite value")
    b = np.zeros(W.shape[0]) if bias is None else np.asarray(bias, dtype=np.float64)
    if b.shape != (W.shape[0],):
        raise InputError(f"bias: shape {b.shape} does not match the {W.shape[0]} rows of W")
    if not np.all(np.isfinite(b)):
        raise InputError("bias: non-finite value")
    return W, b


def _certified_winners(W: np.ndarray, b: np.ndarray, H: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    r"""For each row k of H, whether ``tokens[k]`` is the strict argmax of W h_k + b by more than the
    rounding of the logits. Any summation order computes :math:`w_j \cdot h` to within
    :math:`\gamma_D |w_j| \cdot |h| \le \gamma_D \|w_j\| \|h\|`, and adding :math:`b_j` rounds once more."""
    V, D = W.shape
    unit = (D + 2) * 2.0**-53 * 1.01  # >= gamma_{D+2} = (D+2)u / (1 - (D+2)u) while (D+2)u < 0.0099
    row_norms = np.linalg.norm(W, axis=1)
    wins = np.zeros(len(tokens), dtype=bool)
    block = max(1, BLOCK_ENTRIES // V)
    for start in range(0, len(tokens), block):
        own = tokens[start : start + block]
        h = H[start : start + block]
        z = W @ h.T + b[:, None]
        error = unit * (row_norms[:, None] * np.linalg.norm(h, axis=1) + np.abs(b)[:, None])
        columns = np.arange(len(own))
        lowest_own = z[own, columns] - error[own, columns]
        z += error
        z[own, columns] = -np.inf
        wins[start : start + block] = lowest_own > z.max(axis=0)
    return wins


def strict_winner(W: np.ndarray, b: np.ndarray, h: np.ndarray, token: int) -> bool:
    """Whether ``token`` is the strict argmax of W h + b, by more than the rounding of the logits."""
    return bool(_certified_winners(W, b, h[None, :], np.array([token]))[0])


def duplicate_losers(W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Tokens that can never win outright because another token has the same row and a bias at least
    as large: their logits tie or lose for every h (exact, no rounding involved)."""
    _, group = np.unique(W, axis=0, return_inverse=True)
    order = np.lexsort((-b, group.ravel()))  # by row, then by bias from the largest down
    g, bias = group.ravel()[order], b[order]
    first = np.r_[True, g[1:] != g[:-1]]
    tied_with_next = np.r_[(g[1:] == g[:-1]) & (bias[1:] == bias[:-1]), False]
    loses = ~first | tied_with_next
    return np.sort(order[loses])


def whitened_directions(W: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    r"""Candidates :math:`h_i = C^+ (w_i - \bar w)`, C the covariance of the rows: in whitened
    coordinates :math:`x = C^{+/2}(w - \bar w)` this is :math:`h = x_i`, whose logit
    :math:`\|x_i\|^2` beats :math:`x_j \cdot x_i` unless x_j lies near x_i's direction with a larger
    norm. Shifting every row by the mean moves every logit by the same amount."""
    centred = W - W.mean(axis=0)
    values, vectors = np.linalg.eigh(centred.T @ centred / len(W))
    keep = values > values.max() * W.shape[1] * 2.0**-52
    inverse = (vectors[:, keep] / values[keep]) @ vectors[:, keep].T
    return centred[tokens] @ inverse


def reflect_toward_winner(W: np.ndarray, b: np.ndarray, h: np.ndarray, token: int, steps: int) -> np.ndarray | None:
    r"""Reflect h across the tie hyperplane between ``token`` and the current winner j,
    :math:`h \leftarrow h + 2 (z_j - z_i) (w_i - w_j) / \|w_i - w_j\|^2`, which turns i's deficit to
    j into the same lead; stop when i wins by more than rounding. Returns h, or None."""
    for _ in range(steps):
        if strict_winner(W, b, h, token):
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
    return h if strict_winner(W, b, h, token) else None


def argmax_lp(
    W: np.ndarray, b: np.ndarray, token: int, competitors: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """The margin LP for one token, solved with HiGHS: maximise delta over (h, s, delta) with
    (w_j - w_i) h + (b_j - b_i) s + delta <= 0 for the competitors j (all other tokens by default),
    h in [-1, 1]^D, s in [0, 1], delta <= 1. Positive delta: the token beats those competitors at
    h/s, or (s = 0) far enough along h to pass every bias gap. Fewer competitors can only raise the
    optimum, so a margin <= 0 over a subset settles "never wins". Returns delta and the candidate h."""
    from scipy.optimize import linprog

    V, D = W.shape
    others = np.delete(np.arange(V), token) if competitors is None else competitors
    A = np.hstack([W[others] - W[token], (b[others] - b[token])[:, None], np.ones((len(others), 1))])
    cost = np.zeros(D + 2)
    cost[-1] = -1.0
    bounds = [(-1.0, 1.0)] * D + [(0.0, 1.0), (None, 1.0)]
    result = linprog(cost, A_ub=A, b_ub=np.zeros(len(others)), bounds=bounds, method="highs")
    if result.status != 0:
        raise ArithmeticError(f"argmax LP for token {token}: {result.message}")
    h, s = result.x[:D], result.x[D]
    if s > 0:
        return float(-result.fun), h / s
    # A direction at infinity: scale it past every bias gap, t (w_i - w_j) h > b_j - b_i.
    gains = (W[token] - W) @ h
    gaps = b - b[token]
    needed = np.max(np.where(gains > 0, gaps / np.where(gains > 0, gains, 1.0), 0.0), initial=0.0)
    return float(-result.fun), h * (2 * needed + 1)


def cutting_plane_lp(W: np.ndarray, b: np.ndarray, token: int, h: np.ndarray) -> tuple[float, np.ndarray | None]:
    """Decide one token by the margin LP over a growing set of competitors: start from the
    ``LP_CUTS`` strongest at h, and after each solve add the strongest competitors at the LP's
    answer until it wins outright (re-checked over all V) or the margin drops to the floor.
    Returns the last margin and a winning h (None when the token never wins)."""

    def strongest(at: np.ndarray, exclude: np.ndarray) -> np.ndarray:
        z = W @ at + b
        z[token] = -np.inf
        z[exclude] = -np.inf
        top = np.argsort(-z)[:LP_CUTS]
        return top[np.isfinite(z[top])]

    competitors = strongest(h, np.array([], dtype=np.int64))
    while True:
        delta, candidate = argmax_lp(W, b, token, competitors)
        if delta <= LP_MARGIN_FLOOR:
            return delta, None
        if strict_winner(W, b, candidate, token):
            return delta, candidate
        added = strongest(candidate, competitors)
        if len(added) == 0:  # every competitor already in: the candidate loses only to rounding
            return delta, None
        competitors = np.concatenate([competitors, added])


def argmaxable(
    W: Any, bias: Any = None, *, tokens: Any = None, on_progress: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Decide for every token whether some h makes it the strict argmax of W h + b.

    In order: exact duplicates that lose to a twin; batched certificates, the whitened
    :math:`h = C^+(w_i - \\bar w)` and then h = s w_i, each checked by evaluating every logit
    with a rounding bound; reflections toward the current winner; and the cutting-plane margin
    LP, whose positive answers are re-checked the same way. ``tokens`` restricts the decisions to
    some token ids (all by default; the others are left with method ""). ``on_progress(n)`` is
    called as n more tokens are decided. Returns ``argmaxable`` (a winning h was certified),
    ``never`` (shown never to win), how each token was decided, and the LP margins (NaN where no LP
    ran). A token in neither set is undecided: the LP found a positive margin that rounding hides."""
    W, b = _validated_head(W, bias)
    V = W.shape[0]
    wanted = np.ones(V, dtype=bool)
    if tokens is not None:
        ids = np.asarray(tokens)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer) or np.any((ids < 0) | (ids >= V)):
            raise InputError(f"tokens: expected a 1-D array of token ids in [0, {V}), got {tokens!r:.60}")
        wanted[:] = False
        wanted[ids] = True
    progress = on_progress or (lambda n: None)
    decided = np.zeros(V, dtype=bool)
    method = np.full(V, "", dtype=object)
    margins = np.full(V, np.nan)
    losers = duplicate_losers(W, b)
    losers = losers[wanted[losers]]
    method[losers] = "duplicate row"
    progress(len(losers))
    open_tokens = np.flatnonzero((method == "") & wanted)
    candidates = [("certificate whitened", lambda t: whitened_directions(W, t))]
    candidates += [(f"certificate h = {s:g} w_i", lambda t, s=s: s * W[t]) for s in CHEAP_SCALES]
    for name, direction in candidates:
        if len(open_tokens) == 0:
            break
        wins = _certified_winners(W, b, direction(open_tokens), open_tokens)
        decided[open_tokens[wins]] = True
        method[open_tokens[wins]] = name
        progress(int(wins.sum()))
        open_tokens = open_tokens[~wins]
    starts = whitened_directions(W, open_tokens) if len(open_tokens) else np.empty((0, W.shape[1]))
    for token, start in zip(open_tokens, starts, strict=True):
        h = reflect_toward_winner(W, b, start, token, REFLECTION_STEPS)
        if h is not None:
            decided[token], method[token] = True, "reflections"
        else:
            margins[token], h = cutting_plane_lp(W, b, token, start)
            decided[token] = h is not None
            if h is not None:
                method[token] = "LP, re-checked"
            elif margins[token] <= LP_MARGIN_FLOOR:
                method[token] = f"LP margin <= {LP_MARGIN_FLOOR:g}"
            else:  # every competitor constrained, yet the answer wins by less than rounding
                method[token] = "LP margin positive, not certified"
        progress(1)
    never = (method == "duplicate row") | (method == f"LP margin <= {LP_MARGIN_FLOOR:g}")
    return {"argmaxable": decided, "never": never, "method": method, "lp_margin": margins}


# --------------------------------------------------------------------------- codes on the sphere


def sphere_code(V: int, D: int, seed: int = 0) -> np.ndarray:
    """V unit vectors in R^D spread over the sphere: the circle for D = 2, the Fibonacci lattice for
    D = 3 (minimal angle about 3.8/sqrt(V)), normalised Gaussian points for D >= 4."""
    V = check_size(V, "V", 2, 1 << 24)
    D = check_size(D, "D", 2, 1 << 12)
    if D == 2:
        return circle_head(V)
    if D == 3:
        k = np.arange(V) + 0.5
        polar = np.arccos(1 - 2 * k / V)
        azimuth = np.pi * (1 + 5**0.5) * k
        return np.stack([np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar), np.cos(polar)], axis=1)
    points = np.random.default_rng(check_size(seed, "seed", 0)).standard_normal((V, D))
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
