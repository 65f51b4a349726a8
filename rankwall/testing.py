"""pytest for a user's theorems: :func:`assert_holds` and the ``rankwall_backend`` fixture.

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
    from rankwall.checks.backends import BackendUnavailable, resolve

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
    from rankwall.checks.verdict import OutsideDomain, Status

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
    shrunk, certified ``violated`` :class:`~rankwall.checks.verdict.Verdict`. Raises ``AssertionError``
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
