r"""The secular solver of :func:`rankwall.theory.softmax_jacobian.spectral_norm` as a compiled kernel
(numba) for probability rows on NumPy, float64 and float32 (PyTorch/CPU passes its zero-copy NumPy
view). It computes what the array-API route computes, each entry's terms by the same IEEE operations
in the same order, with the loops over a row fused into few passes:

- the first pass, the only one that reads the row from memory (the passes after it find the row in
  cache), asking for it :data:`PREFETCH` entries ahead: the largest entry of each block of
  :data:`BLOCK` entries, the least entry and the total :math:`T`, compensated. From the block
  maxima and one block: the largest entry :math:`m` and the largest of the others :math:`\sigma`
  (equal to :math:`m` when the top occurs twice: a tie);
- the moment route (``_moment_roots`` there), from ``MOMENT_ROUTE_MIN_V`` on, for the rows it takes:
  one pass for the six tail moments :math:`M_j = \sum r_i^2/(m - r_i)^j` about the top pole (one
  reciprocal per entry), the Newton solve of the model and the remainder bound on the row's
  scalars, and at most one more pass, for moments about the second centre. Unlike the array route,
  the kernel may split the tail first (:func:`_split`): the few entries closest to the top pole,
  found from the block maxima without a pass, are added exactly in the model (the near terms
  :math:`r_i^2/((m - r_i) - Z)`), and the moments and their remainder bound cover the others, whose
  distance from the pole is larger; then the second centre is rarely needed (none of the
  benchmark's 96 Dirichlet rows at V = 131,072, against 86 of them with four moments and no split);
- the bracketing solver (``_from_probabilities`` and ``_solve`` there), for the rows the moments do
  not settle: the tail sum and the scaled tail :math:`q_i = r_i/\sigma` with its poles removed in
  one pass, then the secular tail sum and its slope in one pass per iteration.

The first pass and the moment pass keep :data:`REGISTER_LANES` lanes of each accumulator in an
array on the stack (:func:`_on_stack`): it cannot alias the row, so the compiler keeps the lanes in
SIMD registers for the whole pass (an accumulator array passed in might alias the row, and was
stored back after every SIMD vector). The bracketing solver's passes keep :data:`LANES` lanes in
memory, as before.

The top entry is left out of the tail by its value: a row whose two largest entries are equal is a
tie and is closed before any tail is read, so in every other row exactly one entry is above
:math:`\sigma` (the array route sets it to 0, whose terms are exactly 0); the moment pass leaves out
every entry above its split in the same way, the near entries being added in the model instead.

Rounding. Each term is formed by the operations the array-API route uses, in its order (the distance,
its reciprocal, the chain :math:`t_0 = r w, t_{a+1} = t_a w` and one product per moment; the scaled
entry, its offset :math:`1 - q_i`, the square, the offset :math:`\mu - q_i`, the division of a
secular term and of its slope); a near term is :math:`(r r)/((m - r) - Z)`, three roundings, as
:math:`m - r` is exact (Sterbenz: every near entry is at least m/2). Only the order of the sums
differs: :data:`REGISTER_LANES` (first pass, moments) or :data:`LANES` (bracketing) partial sums,
each sequential over every lane-th entry, then added in turn, a tree of V - 1 additions of the terms
(the zeros that pad the last block add exactly), inside the :math:`\gamma_{V-1}` the model charges
every sum in any order; the row total and the tail sum are compensated (TwoSum), their error a few u.
The moment route's own charges (``SPECTRAL_NORM_ROUNDINGS`` in the caller): the term of
:math:`M_{j+1}` carries :math:`3j + 4` roundings, and at the root it is weighted by
:math:`(Z/(m - r_i))^j \le 4^{-j}` (the route takes only rows with :math:`Z \le g/4`), so the series
at the root carries at most :math:`4 + 3\cdot\tfrac13 = 5` on average, Horner's rule and the
side's sum at most :math:`2 + 2\cdot\tfrac13`, the square :math:`m^2` one, the remainder u/4 and
Newton's stop 2: under V + 12 roundings on Z in all; and Z enters the norm through
:math:`\lambda T = m - Z` damped by :math:`Z/(m - Z) \le 1/3` (as :math:`Z \le m^2/T \le g/4 \le
m/4`), so with the subtraction, the division by T and T's few u the route stays inside the
:math:`\gamma_{V+8}` of the model: :math:`(V + 12)/3 + 4 \le V + 8`. At the second centre (two
moments, distance at least ``reach`` from every tail entry) the offset e may be negative, but a row
is accepted there only with :math:`e^2 M_2 \le u T\,\text{reach}/4`, and :math:`M_2 \le
M_1/\text{reach}`, so :math:`|e| M_2 \le \sqrt{u T M_1}/2 \le \sqrt{u}\,(T + M_1)/4`: the one
negative term cannot cancel the side, and the same count holds. Nothing is
reassociated or contracted by the compiler: no ``fastmath`` (so no fused multiply-add either), IEEE
division by zero (``error_model="numpy"``), and every constant is of the row's dtype, so a float32
row is computed in float32 throughout, as on the array-API route (both tested on the compiled
code). The partial sums are independent, so the compiler's loop vectoriser runs the entries of a
pass in SIMD lanes (division included) without reordering any sum. The maxima and minima are plain
comparisons: a NaN entry may be passed over by them, but it makes the total NaN and the row is
refused, as is a row with an infinite entry (its total is infinite or NaN).

Compiled on first use per dtype and cached on disk (``cache=True``) next to this file.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: Independent partial sums per reduction (the summation order the rounding model is charged for).
LANES = 64

#: Partial sums (and maxima) per register-resident reduction: the first pass and the moment pass
#: keep :data:`REGISTER_LANES` lanes of each accumulator on the stack (:func:`_on_stack`), which the
#: compiler keeps in SIMD registers across the whole row.
REGISTER_LANES = 16

#: Moments of the tail the moment pass takes about the top pole (the most the caller may ask for).
TOP_MOMENTS = 6

#: Row outcomes (``routes`` of :func:`spectral_norms`).
CLOSED, FIRST_MOMENTS, SECOND_MOMENTS, BRACKETING, INVALID, UNCONVERGED = range(6)

_JIT = {"cache": True, "error_model": "numpy", "nogil": True}


def _on_stack(count: int):
    """An intrinsic giving a pointer to ``count`` values of a dtype in the calling function's stack
    frame. Accumulators there cannot alias the row, so once the compiler has vectorised and unrolled
    the loop over lanes it keeps them in registers (an accumulator in an array it is passed may
    alias the row, and is stored back after every SIMD vector)."""

    @intrinsic
    def stack(typingctx, dtype):  # noqa: ANN001
        def codegen(context, builder, signature, args):  # noqa: ANN001
            return cgutils.alloca_once(builder, context.get_value_type(dtype.dtype), size=count)

        return types.CPointer(dtype.dtype)(dtype), codegen

    return stack


@intrinsic
def _prefetch(typingctx, array, index):  # noqa: ANN001
    """A hint to the processor to bring ``array[index]`` into cache (LLVM's ``prefetch``: for reading,
    kept in all levels); no effect on any value."""

    def codegen(context, builder, signature, args):  # noqa: ANN001
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        byte = ir.IntType(8).as_pointer()
        hint = ir.FunctionType(ir.VoidType(), [byte, ir.IntType(32), ir.IntType(32), ir.IntType(32)])
        function = cgutils.get_or_insert_function(builder.module, hint, "llvm.prefetch.p0i8")
        flags = [ir.Constant(ir.IntType(32), flag) for flag in (0, 3, 1)]
        builder.call(function, [builder.bitcast(builder.gep(data, [args[1]]), byte), *flags])
        return context.get_dummy_value()

    return types.void(array, index), codegen


_FIRST_LANES = _on_stack(4 * REGISTER_LANES)
_MOMENT_LANES = _on_stack(TOP_MOMENTS * REGISTER_LANES)
_PAD = _on_stack(REGISTER_LANES)

#: Entries per block of the first pass, which records each block's largest entry.
BLOCK = 256

#: How far ahead (entries) the first pass asks for the row (:func:`_prefetch`): the hardware's own
#: prefetching alone left the pass at about 1.5 times the time of a NumPy sum over the same rows.
PREFETCH = 1024

#: Entries per cache line (of 64 bytes, float64 entries; float32 rows ask for each line twice).
LINE = 8

#: Most entries near the top pole the moment route adds exactly (beyond them: the second centre).
NEAR_ENTRIES = 32


@njit(inline="always", **_JIT)
def _first_step(acc, lane, r):  # noqa: ANN001
    """One entry r into lane ``lane`` of the first pass's accumulators ``acc`` (rows: the block's
    largest entry, the least entry, the total and its compensation). The total is compensated
    (Knuth's TwoSum, branch-free): the solvers take :math:`1 - m` as the tail sum, so a rounding of
    T shows in the bracketing solver's root multiplied by up to about :math:`1/s` (measured: 13 u on
    a peaked row of 17 entries summed plainly), and T is carried to a few u instead. The maximum
    and the minimum are plain comparisons (one SIMD max or min each); a NaN entry may be passed over
    by them, but it makes the total NaN and the row is refused."""
    largest = acc[0, lane]
    acc[0, lane] = r if r > largest else largest
    low = acc[1, lane]
    acc[1, lane] = r if r < low else low
    total = acc[2, lane]
    added = total + r
    back = added - total
    acc[3, lane] += (total - (added - back)) + (r - back)
    acc[2, lane] = added


@njit(inline="always", **_JIT)
def _block_largest(acc, F):  # noqa: ANN001
    """The largest of the lanes' block maxima ``acc[0]``, which are reset to minus infinity."""
    largest = -F(np.inf)
    for lane in range(REGISTER_LANES):
        x = acc[0, lane]
        largest = x if x > largest else largest
        acc[0, lane] = -F(np.inf)
    return largest


@njit(**_JIT)
def _first_pass(row, maxima, F):  # noqa: ANN001
    """One read of the row (from memory; the passes after it find the row in cache), in
    :data:`REGISTER_LANES` lanes: the largest entry of each block of :data:`BLOCK` entries into
    ``maxima`` (the last, short block padded with zeros), the least entry and the compensated total T."""
    acc = carray(_FIRST_LANES(F), (4, REGISTER_LANES))
    for lane in range(REGISTER_LANES):
        acc[0, lane] = -F(np.inf)
        acc[1, lane] = F(np.inf)
        acc[2, lane] = F(0.0)
        acc[3, lane] = F(0.0)
    n = row.shape[0]
    blocks = n // BLOCK
    for b in range(blocks):
        for start in range(b * BLOCK, (b + 1) * BLOCK, REGISTER_LANES):
            for line in range(0, REGISTER_LANES, LINE):
                _prefetch(row, min(start + PREFETCH + line, n - 1))
            block = row[start : start + REGISTER_LANES]
            for lane in range(REGISTER_LANES):
                _first_step(acc, lane, block[lane])
        maxima[b] = _block_largest(acc, F)
    whole = n - n % REGISTER_LANES
    for start in range(blocks * BLOCK, whole, REGISTER_LANES):
        block = row[start : start + REGISTER_LANES]
        for lane in range(REGISTER_LANES):
            _first_step(acc, lane, block[lane])
    pad = _padded_on_stack(row[whole:], F)
    for lane in range(REGISTER_LANES):
        _first_step(acc, lane, pad[lane])
    maxima[blocks] = _block_largest(acc, F)
    low = acc[1, 0]
    for lane in range(REGISTER_LANES):
        low = acc[1, lane] if acc[1, lane] < low else low
    return low, _compensated(acc, 2, 3, REGISTER_LANES, F)


@njit(**_JIT)
def _top_two(row, maxima, F):  # noqa: ANN001
    """``(m, sigma, k)`` from the block maxima of :func:`_first_pass`: the largest entry m, its (first)
    index k and the largest of the others :math:`\\sigma` (equal to m when m occurs twice), found
    among the other blocks' maxima and the entries of m's block."""
    top, m, sigma = 0, maxima[0], F(0.0)  # the entries of a row that gets here are at least 0
    for b in range(1, maxima.shape[0]):
        x = maxima[b]
        if x > m:
            top, m, sigma = b, x, m
        elif x > sigma:
            sigma = x
    start, stop = top * BLOCK, min((top + 1) * BLOCK, row.shape[0])
    k = -1
    for i in range(start, stop):
        r = row[i]
        if k < 0 and r == m:
            k = i
        elif r > sigma:
            sigma = r
    if k < 0:  # m came from the zeros padding the last block: the entries are all negative or NaN
        k = start
    return m, sigma, k


@njit(**_JIT)
def _largest_above(row, maxima, k, above, near, F):  # noqa: ANN001
    """The largest entries above ``above`` but the top one (index k), as many as ``near`` holds, into
    ``near`` in decreasing order: ``(count, dropped)``, ``dropped`` the largest entry above ``above``
    left out (``above`` when none was). Only the blocks whose largest entry is above ``above`` are
    read, a group of :data:`REGISTER_LANES` entries at a time."""
    count, dropped = 0, above
    size, n = near.shape[0], row.shape[0]
    for b in range(maxima.shape[0]):
        if not maxima[b] > above:
            continue
        for group in range(b * BLOCK, min((b + 1) * BLOCK, n), REGISTER_LANES):
            stop = min(group + REGISTER_LANES, n)
            hits = 0
            for i in range(group, stop):
                hits += row[i] > above
            if hits == 0:
                continue
            for i in range(group, stop):
                r = row[i]
                if i == k or not r > above:
                    continue
                if count == size:
                    if r <= near[size - 1]:
                        dropped = max(dropped, r)
                        continue
                    dropped = max(dropped, near[size - 1])  # the least kept entry makes way
                    count -= 1
                j = count
                while j > 0 and near[j - 1] < r:  # insertion: the list stays sorted
                    near[j] = near[j - 1]
                    j -= 1
                near[j] = r
                count += 1
    return count, dropped


@njit(**_JIT)
def _split(row, maxima, m, k, sigma, z, count, bound, near, F):  # noqa: ANN001
    r"""Where the moment route splits the tail: ``(above, nearby)``, the entries above ``above``
    (the first ``nearby`` of ``near``, decreasing) to be added exactly, those at most ``above`` by
    their ``count`` moments about the top pole m. A guess, as the remainder is checked after the
    pass: with the root at most z, the fewest of the largest entries above m/2 (at most as many as
    ``near`` holds) for which the series' remainder over the other such entries,
    :math:`z^K \sum r_i^2/(m - r_i)^K/(m - r_{n+1} - z)`, is within ``bound`` (the entries below them
    left out of the guess). Each near entry is at least m/2, so its distance m - r is exact. No
    split: ``(sigma, 0)``."""
    one = F(1.0)
    floor = max(m / F(2.0), m - F(1024.0) * z)
    if floor >= sigma:
        return sigma, 0
    found, dropped = _largest_above(row, maxima, k, floor, near, F)
    power = one
    for _ in range(count):
        power = power * z
    far = F(0.0)  # the candidates' part of the remainder, from the smallest candidate up
    terms = np.empty(found + 1, F)
    terms[found] = far
    for j in range(found - 1, -1, -1):
        distance = m - near[j]
        scaled = near[j] * near[j]
        for _ in range(count):
            scaled = scaled / distance
        far += scaled
        terms[j] = far
    for nearby in range(found + 1):
        largest_far = near[nearby] if nearby < found else dropped
        if nearby > 0 and near[nearby - 1] == largest_far:
            continue  # a split between equal entries is no split
        reach = (m - largest_far) - z
        if reach > 0 and power * terms[nearby] / reach <= bound:
            return largest_far, nearby
    return sigma, 0


@njit(inline="always", **_JIT)
def _padded_on_stack(rest, F):  # noqa: ANN001
    """``rest`` (fewer than :data:`REGISTER_LANES` entries) followed by zeros, on the stack."""
    pad = carray(_PAD(F), (REGISTER_LANES,))
    for i in range(REGISTER_LANES):
        pad[i] = F(0.0)
    for i in range(rest.shape[0]):
        pad[i] = rest[i]
    return pad


@njit(inline="always", **_JIT)
def _moment_step(acc, lane, r, above, c, F):  # noqa: ANN001
    """One entry r into lane ``lane`` of :math:`M_1..M_6` about the centre c (an entry above ``above``
    read as 0, whose terms are exactly 0), each term formed as on the array route: w = 1/(c - r),
    :math:`t_0 = r w`, :math:`t_1 = t_0 w`, :math:`t_2 = t_1 w`; terms :math:`t_0 r, t_0 t_0, t_0 t_1,
    t_1 t_1, t_1 t_2, t_2 t_2`."""
    one, zero = F(1.0), F(0.0)
    r = zero if r > above else r
    w = one / (c - r)
    t0 = r * w
    t1 = t0 * w
    t2 = t1 * w
    acc[0, lane] += t0 * r
    acc[1, lane] += t0 * t0
    acc[2, lane] += t0 * t1
    acc[3, lane] += t1 * t1
    acc[4, lane] += t1 * t2
    acc[5, lane] += t2 * t2


@njit(**_JIT)
def _moments(row, above, c, F):  # noqa: ANN001
    """:math:`M_j = \\sum r_i^2/(c - r_i)^j`, j = 1..6, over the entries :math:`r_i \\le` ``above``
    (below the centre c), in one pass of :data:`REGISTER_LANES` lanes (the last block padded with
    zeros, whose terms are exactly 0)."""
    acc = carray(_MOMENT_LANES(F), (TOP_MOMENTS, REGISTER_LANES))
    for j in range(TOP_MOMENTS):
        for lane in range(REGISTER_LANES):
            acc[j, lane] = F(0.0)
    n = row.shape[0]
    whole = n - n % REGISTER_LANES
    for start in range(0, whole, REGISTER_LANES):
        for line in range(0, REGISTER_LANES, LINE):
            _prefetch(row, min(start + PREFETCH + line, n - 1))
        block = row[start : start + REGISTER_LANES]
        for lane in range(REGISTER_LANES):
            _moment_step(acc, lane, block[lane], above, c, F)
    pad = _padded_on_stack(row[whole:], F)
    for lane in range(REGISTER_LANES):
        _moment_step(acc, lane, pad[lane], above, c, F)
    moments = np.empty(TOP_MOMENTS, F)
    for j in range(TOP_MOMENTS):
        total = F(0.0)
        for lane in range(REGISTER_LANES):
            total += acc[j, lane]
        moments[j] = total
    return moments


@njit(**_JIT)
def _compensated(acc, which, compensation, lanes, F):  # noqa: ANN001
    """The ``lanes`` lanes' compensated sums ``acc[which]`` (with their compensations
    ``acc[compensation]``) added into one, compensated too (Neumaier)."""
    total, error = F(0.0), F(0.0)
    for lane in range(lanes):
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
def _model_root(m2, total, z_centre, moments, count, m, near, nearby, start, u, steps, F):  # noqa: ANN001
    r"""Newton on :math:`\phi(Z) = Z(T + P(Z - Z_c) + N(Z)) - m^2` from ``start`` (the array route's
    ``_model_root`` for one row, with the near terms :math:`N(Z) = \sum r_i^2/((m - r_i) - Z)` of the
    first ``nearby`` entries of ``near`` added exactly): ``(Z, converged)``."""
    z = start
    for _ in range(steps):
        e = z - z_centre
        value, slope = moments[count - 1], F(0.0)
        for j in range(count - 2, -1, -1):  # Horner for P and P'
            slope = slope * e + value
            value = value * e + moments[j]
        for i in range(nearby):
            r = near[i]
            d = (m - r) - z
            term = (r * r) / d
            value += term
            slope += term / d
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
    moment route (``counts``: how many moments at the top pole and at the second centre, each at most
    :data:`TOP_MOMENTS`; rows with :math:`m^2 \\le` ``reach`` T g and a runner-up of at least
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
    maxima = np.empty(V // BLOCK + 1, F)
    near = np.empty(NEAR_ENTRIES, F)
    for i in range(n):
        row = rows[i]
        low, total = _first_pass(row, maxima, F)
        routes[i] = INVALID
        if not low >= 0 or not abs(total - one) <= tolerance:
            continue
        m, sigma, k = _top_two(row, maxima, F)
        if not np.isfinite(m):
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
                guess = share * u * total / F(4.0)
                above, nearby = _split(row, maxima, m, k, sigma, m2 / total, first_count, guess, near, F)
                first = _moments(row, above, m, F)
                start = first[0]
                for j in range(nearby):
                    start += (near[j] * near[j]) / (m - near[j])
                start = m2 / (total + start)
                z, converged = _model_root(m2, total, zero, first, first_count, m, near, nearby, start, u, steps, F)
                far = (m - above) * (one - u)
                if converged and _series_is_exact(z, zero, far, first, first_count, total, share, u, F):
                    norms[i], routes[i] = (m - z) / total, FIRST_MOMENTS
                    continue
                centre = m - z
                z_centre = m - centre  # exact (Sterbenz) when the centre lies within a quarter gap of m
                second = _moments(row, sigma, centre, F)
                nearest = (centre - sigma) * (one - u)
                z2, converged = _model_root(m2, total, z_centre, second, second_count, m, near, 0, z, u, steps, F)
                if converged and _series_is_exact(z2, z_centre, nearest, second, second_count, total, share, u, F):
                    norms[i], routes[i] = (m - z2) / total, SECOND_MOMENTS
                    continue
        norms[i], converged = _bracketing(row, m, sigma, total, u, iterations, q, whole, F)
        routes[i] = BRACKETING if converged else UNCONVERGED
    return norms, routes
