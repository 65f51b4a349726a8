r"""The secular solver of :func:`rankwall.theory.softmax_jacobian.spectral_norm` as a compiled kernel
(numba) for probability rows on NumPy, float64 and float32 (PyTorch/CPU passes its zero-copy NumPy
view). It computes what the array-API route computes, the same IEEE operations on each entry in the
same order, with the loops over a row fused into few passes:

- the first pass, the only one that reads the row from memory (the passes after it find the row in
  cache): its largest entry :math:`m`, the largest of the others :math:`\sigma` (equal to :math:`m`
  when the top occurs twice: a tie), its least entry and its total :math:`T`, compensated;
- the moment route (``_moment_roots`` there), from ``MOMENT_ROUTE_MIN_V`` on, for the rows it takes:
  one pass for the four tail moments :math:`M_j = \sum_{r_i \ne m} r_i^2/(m - r_i)^j` about the top
  pole (one reciprocal per entry), the Newton solve of the model and the remainder bound on the
  row's scalars, and at most one more pass, for two moments about the second centre;
- the bracketing solver (``_from_probabilities`` and ``_solve`` there), for the rows the moments do
  not settle: the tail sum and the scaled tail :math:`q_i = r_i/\sigma` with its poles removed in
  one pass, then the secular tail sum and its slope in one pass per iteration.

The per-lane accumulators live in memory (the compiler cannot keep them in registers across
iterations without reassociating), so each accumulator costs a store per SIMD vector of entries:
the first pass keeps five, the moment pass four, the second pass two.

The top entry is left out of the tail by its value: a row whose two largest entries are equal is a
tie and is closed before any tail is read, so in every other row exactly one entry is left out (the
array route sets it to 0, whose terms are exactly 0).

Rounding: each entry's term is formed by the operations the array-API route uses, in its order
(the distance, its reciprocal, the two products of a moment's term; the scaled entry, its offset
:math:`1 - q_i`, the square, the offset :math:`\mu - q_i`, the division of a secular term and of its
slope), so the per-term charges of ``SPECTRAL_NORM_ROUNDINGS`` hold unchanged. Only the order of
the sums differs: :data:`LANES` partial sums, each sequential over every :data:`LANES`-th entry,
then added in turn, a tree of V - 1 additions of the terms (the zeros that pad the last block add
exactly), inside the :math:`\gamma_{V-1}` the model charges every sum in any order; the row total
and the tail sum are compensated (TwoSum), their error a few u. Nothing is reassociated or
contracted by the compiler: no ``fastmath`` (so no fused multiply-add either), IEEE division by zero
(``error_model="numpy"``), and every constant is of the row's dtype, so a float32 row is computed
in float32 throughout, as on the array-API route (both tested on the compiled code). The partial
sums are independent, so the compiler's loop vectoriser runs the entries of a pass in SIMD lanes
(division included) without reordering any sum.

Compiled on first use per dtype and cached on disk (``cache=True``) next to this file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Independent partial sums per reduction (the summation order the rounding model is charged for).
LANES = 64

#: Row outcomes (``routes`` of :func:`spectral_norms`).
CLOSED, FIRST_MOMENTS, SECOND_MOMENTS, BRACKETING, INVALID, UNCONVERGED = range(6)

_JIT = {"cache": True, "error_model": "numpy", "nogil": True}


@njit(**_JIT)
def _read_blocks(x, acc, F):  # noqa: ANN001
    """Add whole blocks of :data:`LANES` entries (len(x) a multiple of it) into the first pass's
    per-lane accumulators ``acc`` (rows: the largest entry, the second largest (equal to the largest
    when it occurs twice), the least entry, the total and its compensation). The total is compensated
    (Knuth's TwoSum, branch-free): the solvers take :math:`1 - m` as the tail sum, so a rounding of T
    shows in the bracketing solver's root multiplied by up to about :math:`1/s` (measured: 13 u on a
    peaked row of 17 entries summed plainly), and T is carried to a few u instead. The maxima and the
    minimum are NumPy's (a NaN entry makes them NaN, and the row is refused), the form the loop
    vectoriser runs in SIMD lanes."""
    for start in range(0, x.shape[0], LANES):
        block = x[start : start + LANES]
        for lane in range(LANES):
            r = block[lane]
            largest = acc[0, lane]
            acc[1, lane] = np.maximum(acc[1, lane], np.minimum(largest, r))
            acc[0, lane] = np.maximum(largest, r)
            acc[2, lane] = np.minimum(acc[2, lane], r)
            total = acc[3, lane]
            added = total + r
            back = added - total
            acc[4, lane] += (total - (added - back)) + (r - back)
            acc[3, lane] = added


@njit(**_JIT)
def _first_pass(row, whole, F):  # noqa: ANN001
    """One read of the row (from memory; the passes after it find the row in cache): its largest
    entry m, the largest of the others :math:`\\sigma` (equal to m at a tie), its least entry and
    its compensated total T (``whole``: the entries in whole blocks of lanes)."""
    acc = np.zeros((5, LANES), F)
    acc[0, :] = -np.inf
    acc[1, :] = -np.inf
    acc[2, :] = np.inf
    _read_blocks(row[:whole], acc, F)
    _read_blocks(_padded(row[whole:], F), acc, F)
    top = np.argmax(acc[0])
    largest = acc[0, top]
    second = acc[1, top]
    for lane in range(LANES):
        if lane != top:
            second = np.maximum(second, acc[0, lane])
    return largest, second, acc[2].min(), _compensated(acc, 3, 4, F)


@njit(**_JIT)
def _moment_blocks(x, m, acc, F):  # noqa: ANN001
    """Add whole blocks of :data:`LANES` entries into :math:`M_1..M_4` about the top pole m (the
    entry equal to m read as 0, whose terms are exactly 0), each tail entry's terms formed as on the
    array route: w = 1/(m - r), t = r w, t' = t w; terms t r, t t, t t', t' t'."""
    one, zero = F(1.0), F(0.0)
    for start in range(0, x.shape[0], LANES):
        block = x[start : start + LANES]
        for lane in range(LANES):
            r = block[lane]
            r = zero if r == m else r
            w = one / (m - r)
            t = r * w
            following = t * w
            acc[0, lane] += t * r
            acc[1, lane] += t * t
            acc[2, lane] += t * following
            acc[3, lane] += following * following


@njit(**_JIT)
def _four_moments(row, m, whole, F):  # noqa: ANN001
    """:math:`M_1..M_4` of the tail about the top pole m, in one pass."""
    acc = np.zeros((4, LANES), F)
    _moment_blocks(row[:whole], m, acc, F)
    _moment_blocks(_padded(row[whole:], F), m, acc, F)
    return acc[0].sum(), acc[1].sum(), acc[2].sum(), acc[3].sum()


@njit(**_JIT)
def _compensated(acc, which, compensation, F):  # noqa: ANN001
    """The lanes' compensated sums ``acc[which]`` (with their compensations ``acc[compensation]``)
    added into one, compensated too (Neumaier)."""
    total, error = F(0.0), F(0.0)
    for lane in range(LANES):
        for value in (acc[which, lane], acc[compensation, lane]):
            added = total + value
            error += (total - added) + value if abs(total) >= abs(value) else (value - added) + total
            total = added
    return total + error


@njit(**_JIT)
def _padded(rest, F):  # noqa: ANN001
    """``rest`` (fewer than :data:`LANES` entries) followed by zeros, :data:`LANES` in all: zeros are
    exact no-ops in every sum of this module, so whole blocks of lanes cover a row."""
    padded = np.zeros(LANES, F)
    for i in range(rest.shape[0]):
        padded[i] = rest[i]
    return padded


@njit(**_JIT)
def _two_moments_blocks(x, m, c, acc, F):  # noqa: ANN001
    """Add whole blocks of :data:`LANES` entries into :math:`M_1, M_2` about c (the entry equal to m
    read as 0), each term as on the array route: t = r (1/(c - r)), terms t r and t t."""
    one, zero = F(1.0), F(0.0)
    for start in range(0, x.shape[0], LANES):
        block = x[start : start + LANES]
        for lane in range(LANES):
            r = block[lane]
            r = zero if r == m else r
            t = r * (one / (c - r))
            acc[0, lane] += t * r
            acc[1, lane] += t * t


@njit(**_JIT)
def _two_moments(row, m, c, whole, F):  # noqa: ANN001
    """:math:`M_1, M_2` of the tail (every entry but the one equal to m) about the centre c, in one
    pass (``whole``: the entries in whole blocks of lanes)."""
    acc = np.zeros((2, LANES), F)
    _two_moments_blocks(row[:whole], m, c, acc, F)
    _two_moments_blocks(_padded(row[whole:], F), m, c, acc, F)
    zero = F(0.0)
    return acc[0].sum(), acc[1].sum(), zero, zero


@njit(**_JIT)
def _model_root(m2, total, z_centre, moments, count, start, u, steps, F):  # noqa: ANN001
    r"""Newton on :math:`\phi(Z) = Z(T + P(Z - Z_c)) - m^2` from ``start`` (the array route's
    ``_model_root`` for one row): ``(Z, converged)``."""
    z = start
    for _ in range(steps):
        e = z - z_centre
        value, slope = moments[count - 1], F(0.0)
        for j in range(count - 2, -1, -1):  # Horner for P and P'
            slope = slope * e + value
            value = value * e + moments[j]
        side = total + value
        step = (z * side - m2) / (side + z * slope)
        z = z - step
        if abs(step) <= F(2.0) * u * z:
            return z, True
    return z, False


@njit(**_JIT)
def _series_is_exact(z, z_centre, reach, moments, count, total, share, u, F):  # noqa: ANN001
    """The array route's ``_series_is_exact`` for one row: the remainder after ``count`` terms is
    at most ``share`` u of T."""
    e = z - z_centre
    left = reach - max(e, F(0.0))
    power = F(1.0)
    for _ in range(count):
        power = power * abs(e)
    remainder = power * moments[count - 1] / left
    return left > 0 and np.isfinite(remainder) and remainder <= share * u * total


@njit(**_JIT)
def _scaled_tail(row, m, scale, q, F):  # noqa: ANN001
    """Fill ``q`` with :math:`q_i = r_i/\\sigma` (0 for the top entry), each pole (q_i = 1) removed
    (set to 0) and counted; returns the count and the tail sum :math:`\\sum_{r_i \\ne m} r_i`,
    compensated (TwoSum) for the reason the total is (:func:`_read_blocks`)."""
    one, zero = F(1.0), F(0.0)
    poles, tail, error = zero, zero, zero
    for i in range(row.shape[0]):
        x = row[i]
        x = zero if x == m else x
        added = tail + x
        back = added - tail
        error += (tail - (added - back)) + (x - back)
        tail = added
        scaled = x / scale
        pole = one if scaled >= one else zero
        q[i] = scaled - pole
        poles += pole
    return poles, tail + error


@njit(**_JIT)
def _secular_blocks(q, y, acc, F):  # noqa: ANN001
    r"""Add whole blocks of :data:`LANES` scaled entries into the secular sums at :math:`\mu = 1 + y`."""
    one = F(1.0)
    for start in range(0, q.shape[0], LANES):
        block = q[start : start + LANES]
        for lane in range(LANES):
            x = block[lane]
            diff = (one - x) + y
            term = (x * x) / diff
            acc[0, lane] += term
            acc[1, lane] += term / diff


@njit(**_JIT)
def _secular_pass(q, y, whole, F):  # noqa: ANN001
    r""":math:`R = \sum q_i^2/(\mu - q_i)` and :math:`R' = \sum q_i^2/(\mu - q_i)^2` at
    :math:`\mu = 1 + y`, with :math:`\mu - q_i = (1 - q_i) + y` (as on the array route), in one pass."""
    acc = np.zeros((2, LANES), F)
    _secular_blocks(q[:whole], y, acc, F)
    _secular_blocks(_padded(q[whole:], F), y, acc, F)
    return acc[0].sum(), acc[1].sum()


@njit(**_JIT)
def _bracketing(row, top_raw, second_raw, total, u, max_iterations, q, whole, F):  # noqa: ANN001
    """The array route's ``_from_probabilities`` and ``_solve`` for one row that is neither tied nor
    one-hot (``q``: a buffer of the row's length): ``(norm, converged)``."""
    one, zero, inf = F(1.0), F(0.0), F(np.inf)
    poles, s_raw = _scaled_tail(row, top_raw, second_raw, q, F)
    m, s = top_raw / total, s_raw / total
    sigma = second_raw / total
    a = m * s / sigma
    top_gap = m - sigma
    far = sigma < top_gap * F(2.0**-40)
    g = F(2.0) * one * F(2.0**40) if far else top_gap / sigma
    tau = max(a, one) if far else g / F(2.0)
    high = False
    lo, hi = zero, (g if far else g / F(2.0))
    phi_lo, phi_hi = -inf, inf
    for iteration in range(max_iterations):
        y = g - tau if high else tau
        rest, rest_slope = _secular_pass(q, y, whole, F)
        top_dist = sigma * tau if high else top_gap - sigma * tau
        mu = one + y
        f = (mu - a) / top_dist - (rest + poles / y)
        if iteration == 0:
            high = not far and f < 0
            lo, hi = zero, (g if far else g / F(2.0))
            phi_hi = inf if far else abs(f)
        else:
            phi = -f if high else f
            if phi < 0:  # the root lies at a larger offset
                lo, phi_lo = tau, phi
            elif f != 0:
                hi, phi_hi = tau, phi
        alpha = rest_slope * y * y
        beta = max(rest - alpha / y, zero)
        c = poles + alpha
        qa = one + sigma * beta
        qb = one - a - top_gap * beta + sigma * c
        disc_y = max(qb * qb + F(4.0) * qa * top_gap * c, zero)
        if qb >= 0:
            root_y = F(2.0) * top_gap * c / (qb + np.sqrt(disc_y))
        else:
            root_y = (np.sqrt(disc_y) - qb) / (F(2.0) * qa)
        g_near = one if far else g
        kz = g_near * (g_near + one - a)
        mid = F(2.0) * qa * g_near + qb
        disc_z = max(mid * mid - F(4.0) * qa * kz, zero)
        root_z = F(2.0) * kz / (mid + np.sqrt(disc_z))
        model = root_z if high else root_y
        finite = np.isfinite(model)
        inside = finite and lo < model < hi
        known = np.isfinite(phi_lo) and np.isfinite(phi_hi)
        secant = hi - (hi - lo) * ((phi_hi if known else zero) / (phi_hi - phi_lo if known else one))
        secant_inside = known and np.isfinite(secant) and lo < secant < hi
        new = model if inside else (secant if secant_inside else (lo + hi) / F(2.0))
        small_model = finite and abs(model - tau) <= u * mu
        small_secant = not inside and secant_inside and abs(secant - tau) <= u * mu
        small = small_model or small_secant
        if iteration > 0 and (f == 0 or small or hi - lo <= F(2.0) * u * mu):
            if small and f != 0:
                tau = model if small_model else secant
            return (m - sigma * tau if high else sigma + sigma * tau), True
        tau = new
    return zero, False


@njit(**_JIT)
def spectral_norms(rows, moments, counts, reach, share, smallest_sigma, tolerance, u, iterations, steps, F):  # noqa: ANN001
    """``(norms, routes)`` of raw probability rows (R, V), C-contiguous, of dtype ``F``, a row at a
    time (its maximum, then the setup pass, which finds the row in cache). ``moments``: try the
    moment route (``counts``: how many moments at the top pole, at most 4, and at the second centre,
    at most 2; rows with :math:`m^2 \\le` ``reach`` T g and a runner-up of at least
    ``smallest_sigma``; remainders within ``share`` u T); ``tolerance``: the largest :math:`|T - 1|`
    a row is accepted with (others: route INVALID and no norm); ``iterations``, ``steps``: the
    bracketing solver's and Newton's caps. One route per row: CLOSED
    (tie or one-hot), FIRST_MOMENTS, SECOND_MOMENTS, BRACKETING, INVALID or UNCONVERGED."""
    zero, one = F(0.0), F(1.0)
    first_count, second_count = counts
    n, V = rows.shape
    whole = V - V % LANES
    norms = np.zeros(n, F)
    routes = np.empty(n, np.int8)
    q = np.empty(V, F)
    for i in range(n):
        row = rows[i]
        m, sigma, low, total = _first_pass(row, whole, F)
        routes[i] = INVALID
        if not np.isfinite(m) or not low >= 0 or not abs(total - one) <= tolerance:
            continue
        routes[i] = CLOSED
        if sigma == m:  # a tie at the top
            norms[i] = m / total
            continue
        if sigma == 0:
            continue
        if moments:
            gap = (m - sigma) * (one - u)  # rounded down: a lower bound
            m2 = m * m
            if sigma >= smallest_sigma and m2 <= reach * total * gap:
                first = _four_moments(row, m, whole, F)
                z, converged = _model_root(m2, total, zero, first, first_count, m2 / (total + first[0]), u, steps, F)
                if converged and _series_is_exact(z, zero, gap, first, first_count, total, share, u, F):
                    norms[i], routes[i] = (m - z) / total, FIRST_MOMENTS
                    continue
                centre = m - z
                z_centre = m - centre  # exact (Sterbenz) when the centre lies within a quarter gap of m
                second = _two_moments(row, m, centre, whole, F)
                nearest = (centre - sigma) * (one - u)
                z2, converged = _model_root(m2, total, z_centre, second, second_count, z, u, steps, F)
                if converged and _series_is_exact(z2, z_centre, nearest, second, second_count, total, share, u, F):
                    norms[i], routes[i] = (m - z2) / total, SECOND_MOMENTS
                    continue
        norms[i], converged = _bracketing(row, m, sigma, total, u, iterations, q, whole, F)
        routes[i] = BRACKETING if converged else UNCONVERGED
    return norms, routes
