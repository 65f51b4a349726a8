"""Experiments: runs that measure the theory on synthetic and real data, writing JSON and PNG.

Each experiment is one module of this package, found automatically: ``rankwall experiment NAME``
lists every module that defines

- ``NAME``: the command's name, and ``SUMMARY``: one line for ``--help``;
- ``add_arguments(parser)``: the experiment's own flags (``--out``, ``--seed`` and ``--json`` are
  given to all);
- ``main(args, out, err)``: runs it, writes its JSON and PNG into ``args.out`` and prints a table on
  ``out`` (or the records as JSON with ``--json``), with a progress bar on ``err``.

Adding an experiment touches its module, its tests and its docs section, nothing else.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType


@functools.cache
def experiments() -> dict[str, ModuleType]:
    """Every experiment module of this package, keyed by ``NAME``."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "NAME"):
            found[module.NAME] = module
    return dict(sorted(found.items()))
