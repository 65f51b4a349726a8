"""Shared fixtures: the ``backend`` fixture over every installed array library, markers, profiles."""

from __future__ import annotations

import pytest
from backend_specs import BACKEND_SPECS

import rankwall.checks.claims  # noqa: F401  (fills the registry)
from rankwall.checks.engine.backends import BackendUnavailable, cuda_available, installed, resolve
from rankwall.checks.run.strategies import load_profile

HYPOTHESIS_PROFILE = load_profile()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="also run tests marked slow")


def pytest_report_header(config: pytest.Config) -> str:
    return f"hypothesis profile: {HYPOTHESIS_PROFILE}; cuda: {cuda_available()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    has_cuda = cuda_available()
    for item in items:
        if "slow" in item.keywords and not config.getoption("--runslow"):
            item.add_marker(skip_slow)
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)


@pytest.fixture(params=BACKEND_SPECS)
def backend(request: pytest.FixtureRequest):
    """Every installed backend (namespace, device, dtype); GPU ones skip without CUDA."""
    name, device, dtype = request.param
    if not installed(name):
        pytest.skip(f"{name} is not installed")
    try:
        return resolve(name, device, dtype)
    except BackendUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture
def numpy_backend():
    return resolve("numpy")


@pytest.fixture(autouse=True)
def registry_left_as_found():
    """A test that loads a claims file (``--claims``) or declares a claim leaves the registry and the
    loader's memory as it found them, so that a later test on the same worker (the README's claims
    table) sees the shipped claims only."""
    import sys

    from rankwall.checks.engine.verdict import REGISTRY
    from rankwall.checks.run import loader

    claims_before, loaded_before = {c.id for c in REGISTRY}, dict(loader._LOADED)
    yield
    for claim_id in {c.id for c in REGISTRY} - claims_before:
        REGISTRY.unregister(claim_id)
    for key in set(loader._LOADED) - set(loaded_before):
        loader._LOADED.pop(key)
        sys.modules.pop(key, None)  # a module source is imported again, and declares again, next time
