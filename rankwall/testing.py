"""pytest for a user's theorems: :func:`assert_holds`, the ``rankwall_backend`` fixture, and
:func:`assert_close` for an array a backend computed (namespace, dtype, device, shape, then values
within the rounding model's bound).

Installed with rankwall as a pytest plugin (entry point ``pytest11``), so a test file needs nothing
but an import::

    from rankwall.testing import assert_holds

    def test_my_bound(rankwall_backend):
        assert_holds("mine.norm-below-2", V=64, backend=rankwall_backend)

``rankwall_backend`` is parametrized over the array backends installed here, in the manner of
scipy's ``xp`` fixture: NumPy, array-api-strict and PyTorch on the CPU in float64, PyTorch on the
CPU in float32, and PyTorch on CUDA and CuPy where they are installed (skipped, with the reason,
where no CUDA device is). Importing this module is cheap: the backends are imported when a test
asks for one.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable
from typing import Any

import pytest

from rankwall._backend_table import MODULES, select

#: The ids, in :data:`rankwall._backend_table.BACKEND_TABLE`, of the backends ``rankwall_backend`` runs a test on.
PLUGIN_IDS = ("numpy", "strict", "torch-cpu", "torch-cpu-float32", "torch-cuda", "cupy")

#: Those backends as (id, library, device, dtype).
BACKENDS = tuple((spec.id, spec.library, spec.device, spec.dtype) for spec in select(PLUGIN_IDS))


def installed_backends() -> list[tuple[str, str, str | None, str]]:
    """The entries of :data:`BACKENDS` whose library can be imported here."""
    return [spec for spec in BACKENDS if importlib.util.find_spec(MODULES.get(spec[1], spec[1])) is not None]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize every test that asks for ``rankwall_backend`` over :func:`installed_backends`."""
    if "rankwall_backend" in metafunc.fixturenames:
        specs = installed_backends()
        metafunc.parametrize("rankwall_backend", specs, ids=[s[0] for s in specs], indirect=True)


@pytest.fixture
def rankwall_backend(request: pytest.FixtureRequest) -> Any:
    """A rankwall backend (namespace, device, dtype), one per installed library; CUDA ones skip
    without a device."""
    from rankwall.checks.engine.backends import BackendUnavailable, resolve

    _, name, device, dtype = getattr(request, "param", BACKENDS[0])
    try:
        return resolve(name, device, dtype)
    except BackendUnavailable as error:
        pytest.skip(f"{name} on {device or 'its default device'}: {error}")


def _instances(claim: Any, sizes: Iterable[int], examples: int, seed: int) -> list[Any]:
    cases = []
    for V in sizes:
        cases += claim.witnesses(V) + claim.random_instances(V, examples, seed)
    return cases


def assert_holds(
    claim: Any,
    *,
    V: int | Iterable[int] = (2, 3, 64),
    examples: int = 3,
    seed: int = 0,
    backend: Any = None,
    allow_inconclusive: bool = False,
) -> list[Any]:
    """Check ``claim`` (a claim, or its id; a mutant as ``id[name]``) on its witnesses and
    ``examples`` random instances at each vocabulary size ``V``, in ``backend`` (NumPy float64 by
    default), and return the verdicts. Raises ``AssertionError`` naming the claim, the instance, both
    sides, the margin and the method on a violation, and on an undecided instance unless
    ``allow_inconclusive``; a case outside its domain is skipped, and checking no case at all fails."""
    import rankwall
    from rankwall.checks.engine.verdict import OutsideDomain, Status

    chosen = rankwall.get_claim(claim) if isinstance(claim, str) else claim
    sizes = [V] if isinstance(V, int) else list(V)
    used = backend if backend is not None and chosen.array_api else rankwall.backend()
    verdicts = []
    for case in _instances(chosen, sizes, examples, seed):
        try:
            verdict = chosen.check(case, used)
        except OutsideDomain:
            continue
        verdicts.append(verdict)
        if verdict.status is Status.VIOLATED or (verdict.status is Status.INCONCLUSIVE and not allow_inconclusive):
            raise AssertionError(_message(chosen, verdict, used))
    if not verdicts:
        raise AssertionError(f"{chosen.id}: no instance at V = {sizes} was checked")
    return verdicts


def assert_violated(claim: Any, *, budget: int = 300, tighten: Any = 1, backend: Any = None, seed: int = 0) -> Any:
    """Search ``claim`` (a claim, or its id) for a counterexample with Hypothesis (``budget`` examples,
    its bound multiplied by ``tighten``, in ``backend``, NumPy float64 by default) and return it: the
    shrunk, certified ``violated`` :class:`~rankwall.checks.engine.verdict.Verdict`. Raises ``AssertionError``
    when the search finds none (saying how many examples it checked and how many it could not decide),
    so a test of a false statement needs no ``pytest.raises``."""
    import rankwall

    chosen = rankwall.get_claim(claim) if isinstance(claim, str) else claim
    result = rankwall.search(chosen, budget=budget, tighten=tighten, on=backend, seed=seed)
    if result.counterexample is None:
        undecided = f", {result.undecided} undecided" if result.undecided else ""
        raise AssertionError(
            f"{chosen.id} (x {result.tighten}): no counterexample in {result.examples} examples{undecided}\n"
            f"  statement: {chosen.statement}"
        )
    return result.counterexample


def _message(claim: Any, verdict: Any, backend: Any) -> str:
    certified = "" if verdict.certified_by is None else f", certified {verdict.certified_by.value}"
    relation = getattr(claim.relation, "value", str(claim.relation))
    return (
        f"{claim.id} is {verdict.status.value} on {json.dumps(verdict.instance.to_json())} "
        f"({backend.name}/{backend.dtype_name}): lhs {relation} rhs with lhs = {verdict.lhs!r}, "
        f"rhs = {verdict.rhs!r}, margin = {verdict.margin!r} (tolerance {verdict.tolerance!r}); "
        f"{verdict.method}{certified}\n  statement: {claim.statement}"
    )


def _same_device(actual: Any, expected: Any) -> bool:
    """Whether an array's device is the backend's; a torch ``cuda`` without an index means the current one."""
    if actual == expected:
        return True
    index = getattr(expected, "index", 0)
    if getattr(expected, "type", None) == "cuda" and index is None and getattr(actual, "type", None) == "cuda":
        import torch

        return actual.index == torch.cuda.current_device()
    return False


def assert_close(actual: Any, desired: Any, backend: Any, *, what: str, operations: int, magnitude: Any = 0.0) -> None:
    """Assert that ``actual``, an array a function computed on ``backend`` (a
    :class:`~rankwall.checks.engine.backends.Backend`), is ``desired`` (a float64 reference), in the manner of
    scipy's ``xp_assert_close``. In order, it checks that ``actual`` is an array of the backend's
    namespace (``array_namespace(actual) is backend.xp``), of its dtype and on its device, of desired's
    shape; then every value, to within the rounding model's bound for ``operations`` rounded operations
    at the backend's unit roundoff u:

    .. math:: |\\hat x_i - x_i| \\le \\gamma_n(u)\\,\\max(|x_i|, \\text{magnitude}),
        \\qquad \\gamma_n(u) = nu/(1 - nu),

    a relative bound, or an absolute one :math:`\\gamma_n\\cdot\\text{magnitude}` where the reference is
    small beside the terms it was computed from (a sum that cancels); ``magnitude`` is a number or an array
    broadcast to desired's shape (a bound whose scale differs by entry). NaNs agree with NaNs only.
    Raises ``AssertionError`` naming ``what`` (the function and its arguments), the check that failed,
    and for values the first index outside the bound with both values."""
    import array_api_compat
    import numpy as np

    from rankwall.checks.engine.backends import float64_copy
    from rankwall.theory._rounding import gamma, unit_roundoff

    try:
        xp = array_api_compat.array_namespace(actual)
    except TypeError:
        message = f"{what}: namespace: expected an array of {backend.xp.__name__}, got {type(actual).__name__}"
        raise AssertionError(message) from None
    if xp is not backend.xp:
        raise AssertionError(f"{what}: namespace: expected {backend.xp.__name__}, got {xp.__name__}")
    if actual.dtype != backend.dtype:
        raise AssertionError(f"{what}: dtype: expected {backend.dtype}, got {actual.dtype}")
    device = array_api_compat.device(actual)
    if not _same_device(device, backend.device):
        raise AssertionError(f"{what}: device: expected {backend.device}, got {device}")
    reference = np.asarray(desired, dtype=np.float64)
    if tuple(actual.shape) != reference.shape:
        raise AssertionError(f"{what}: shape: expected {reference.shape}, got {tuple(actual.shape)}")
    got = float64_copy(actual)
    u = unit_roundoff(backend.dtype)
    scale = np.broadcast_to(np.asarray(magnitude, dtype=np.float64), reference.shape)
    bound = gamma(operations, u) * np.maximum(np.abs(reference), scale)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(got - reference) <= bound) & ~(np.isnan(got) & np.isnan(reference))
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        size = f"{float(magnitude):g}" if np.ndim(magnitude) == 0 else f"magnitude[{index}] = {scale[index]:g}"
        raise AssertionError(
            f"{what}: values: {int(bad.sum())} of {bad.size} outside gamma_{operations}(u = {u:.3g}) * "
            f"max(|desired|, {size}); first at index {index}: actual {float(got[index])!r}, desired "
            f"{float(reference[index])!r} (|difference| {abs(got[index] - reference[index]):.3g} > {bound[index]:.3g})"
        )
