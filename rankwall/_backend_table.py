"""The one table of array backends that rankwall computes on: read by ``rankwall.checks.engine.backends`` (the
library names the command line accepts), ``rankwall.testing`` (the ``rankwall_backend`` fixture) and the
test suite's ``tests/backend_specs.py``. Standard library only, so that importing the pytest plugin
stays cheap."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rankwall.errors import InputError


@dataclass(frozen=True)
class BackendSpec:
    """One backend: a test id, the library (a ``--backend`` name), its device (None: the library's
    default) and dtype name, and whether it needs a CUDA device."""

    id: str
    library: str
    device: str | None
    dtype: str
    gpu: bool = False


BACKEND_TABLE: tuple[BackendSpec, ...] = (
    BackendSpec("numpy", "numpy", None, "float64"),
    BackendSpec("strict", "array-api-strict", "CPU_DEVICE", "float64"),
    BackendSpec("strict-device1", "array-api-strict", "device1", "float64"),
    BackendSpec("strict-no_float64", "array-api-strict", "no_float64", "float32"),
    BackendSpec("torch-cpu", "torch", "cpu", "float64"),
    BackendSpec("torch-cpu-float32", "torch", "cpu", "float32"),
    BackendSpec("torch-cuda", "torch", "cuda", "float64", gpu=True),
    BackendSpec("torch-cuda-float32", "torch", "cuda", "float32", gpu=True),
    BackendSpec("cupy", "cupy", "cuda", "float64", gpu=True),
)

#: The library names, each once, in the table's order (the command line's ``--backend`` choices).
LIBRARIES: tuple[str, ...] = tuple(dict.fromkeys(spec.library for spec in BACKEND_TABLE))

#: The library names' importable modules, where they differ from the name.
MODULES: dict[str, str] = {"array-api-strict": "array_api_strict"}


def select(ids: Iterable[str]) -> tuple[BackendSpec, ...]:
    """The table's entries with these ids, in the order given; an unknown id is an :class:`InputError`."""
    by_id = {spec.id: spec for spec in BACKEND_TABLE}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise InputError(f"ids: unknown backend ids {unknown} (choose from {', '.join(by_id)})")
    return tuple(by_id[i] for i in ids)
