"""The backends the tests run on (namespace, device, dtype), GPU ones marked: shared by the
``backend`` fixture of conftest.py and the test modules that parametrize over backends at
collection. A module of its own, because ``conftest`` is not importable by name when the docs'
conftest.py is collected in the same run. The entries are those of the one table,
:data:`rankwall._backend_table.BACKEND_TABLE`."""

from __future__ import annotations

import pytest

from rankwall._backend_table import BACKEND_TABLE

BACKEND_SPECS = [
    pytest.param((spec.library, spec.device, spec.dtype), id=spec.id, marks=[pytest.mark.gpu] if spec.gpu else [])
    for spec in BACKEND_TABLE
]
