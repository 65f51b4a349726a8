"""Claims from outside the package: a user's file or module (``--claims FILE_OR_MODULE``) and the
entry points of installed packages (group ``rankwall.claims``).

Loading a source imports it once, with :data:`rankwall.checks.engine.quantities.LOADING_ORIGIN` naming it,
so that every claim it declares (:func:`rankwall.checks.engine.quantities.declare`) registers in
:data:`rankwall.checks.engine.verdict.REGISTRY` with its ``origin``; loading it again returns the same
claims. A source that cannot be found or fails on import is an :class:`InputError` naming it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from rankwall.checks.engine.quantities import LOADING_ORIGIN
from rankwall.checks.engine.verdict import REGISTRY, Claim, load_shipped_families
from rankwall.theory.validation import InputError

#: The entry-point group through which an installed package contributes claims.
ENTRY_POINT_GROUP = "rankwall.claims"

#: Each source loaded so far, by its resolved name, and the ids of the claims it registered.
_LOADED: dict[str, list[str]] = {}


def _looks_like_a_file(source: str) -> bool:
    return source.endswith(".py") or "/" in source or Path(source).is_file()


def source_key(source: str) -> str:
    """How a source is remembered: a file by its absolute path, a module by its name."""
    return str(Path(source).resolve()) if _looks_like_a_file(source) else source


@contextlib.contextmanager
def _origin(name: str) -> Iterator[None]:
    LOADING_ORIGIN.append(name)
    try:
        yield
    finally:
        LOADING_ORIGIN.pop()


def _import_source(source: str, key: str) -> None:
    if _looks_like_a_file(source):
        path = Path(key)
        if not path.is_file():
            raise InputError(f"--claims: no file {source}")
        name = f"rankwall_user_claims_{abs(hash(key))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise InputError(f"--claims: {source} is not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return
    if importlib.util.find_spec(source) is None:
        raise InputError(f"--claims: no file or importable module named {source!r}")
    importlib.import_module(source)


def load_claims(source: str) -> list[Claim]:
    """Import ``source`` (a ``.py`` file, or a module by name) once and return the claims it declared."""
    load_shipped_families()  # the shipped claims first

    key = source_key(source)
    if key not in _LOADED:
        before = {c.id for c in REGISTRY}
        with _origin(key):
            try:
                _import_source(source, key)
            except InputError:
                raise
            except Exception as error:
                where = traceback.extract_tb(error.__traceback__)[-1]
                raise InputError(
                    f"--claims: {source} failed to load: {type(error).__name__}: {error} "
                    f"({Path(where.filename).name}, line {where.lineno})"
                ) from None
        declared = sorted({c.id for c in REGISTRY} - before)
        if not declared:
            raise InputError(f"--claims: {source} declares no claim (call rankwall.declare(...) in it)")
        _LOADED[key] = declared
    return [REGISTRY[claim_id] for claim_id in _LOADED[key]]


def load_entry_points() -> list[Claim]:
    """Load every installed package's claims (entry-point group ``rankwall.claims``): each entry point
    names a module whose import declares claims, or a function that declares them when called."""
    load_shipped_families()  # the shipped claims first

    claims: list[Claim] = []
    for point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        key = f"entry point {point.name} = {point.value}"
        if key in _LOADED:
            claims += [REGISTRY[c] for c in _LOADED[key]]
            continue
        before = {c.id for c in REGISTRY}
        with _origin(key):
            try:
                loaded = point.load()
                if callable(loaded):
                    loaded()
            except Exception as error:
                raise InputError(f"{key}: failed to load: {type(error).__name__}: {error}") from None
        _LOADED[key] = sorted({c.id for c in REGISTRY} - before)
        claims += [REGISTRY[c] for c in _LOADED[key]]
    return claims


def load_all(sources: list[str] | tuple[str, ...] = ()) -> None:
    """The installed packages' claims, then each of ``sources``: what every command that reads the
    registry loads first (a Dask worker too, from the sources its task names)."""
    load_entry_points()
    for source in sources:
        load_claims(source)


def forget(source: str) -> None:
    """Unregister the claims a source declared (for tests that load a file and clean up after)."""
    key = source_key(source)
    for claim_id in _LOADED.pop(key, []):
        REGISTRY.unregister(claim_id)
