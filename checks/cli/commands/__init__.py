"""The commands of ``rankwall``: one module each, found automatically.

A command module defines ``NAME`` (the command), ``HELP`` (one line for ``rankwall --help``),
``ORDER`` (its place in that list), ``add_arguments(parser)`` (its own flags, each with its meaning
and default) and ``run(args, out, err) -> int`` (parse nothing, compute through the library, print a
table on ``out`` or JSON with ``--json``, return the exit code). :mod:`rankwall.checks.cli` only
builds the parser from them, dispatches, and turns errors into exit codes.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType


@functools.cache
def commands() -> dict[str, ModuleType]:
    """Every command module of this package, keyed by ``NAME``, in ``ORDER``."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "NAME"):
            found.append(module)
    return {m.NAME: m for m in sorted(found, key=lambda m: m.ORDER)}
