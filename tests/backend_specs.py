"""The backends the tests run on (namespace, device, dtype), GPU ones marked: shared by the
``backend`` fixture of conftest.py and the test modules that parametrize over backends at
collection. A module of its own, because ``conftest`` is not importable by name when the docs'
conftest.py is collected in the same run."""

from __future__ import annotations

import pytest

BACKEND_SPECS = [
    pytest.param(("numpy", None, "float64"), id="numpy"),
    pytest.param(("array-api-strict", "CPU_DEVICE", "float64"), id="strict"),
    pytest.param(("array-api-strict", "device1", "float64"), id="strict-device1"),
    pytest.param(("array-api-strict", "no_float64", "float32"), id="strict-no_float64"),
    pytest.param(("torch", "cpu", "float64"), id="torch-cpu"),
    pytest.param(("torch", "cpu", "float32"), id="torch-cpu-float32"),
    pytest.param(("torch", "cuda", "float64"), id="torch-cuda", marks=pytest.mark.gpu),
    pytest.param(("torch", "cuda", "float32"), id="torch-cuda-float32", marks=pytest.mark.gpu),
    pytest.param(("cupy", "cuda", "float64"), id="cupy", marks=pytest.mark.gpu),
]
