"""rankwall: the mathematics of the softmax / LM-head bottleneck as claims that can be built,
checked with a certified margin, and searched for counterexamples.

The public API, for stating and checking claims of one's own (see ``docs/conjectures.md``)::

    from rankwall import declare, softmax_jacobian as sj

    declare("mine.norm-below-1.9", statement="‖J‖₂ ≤ 1.9·m(1 − m)",
            lhs=sj.norm, relation="<=", rhs=1.9 * sj.top * sj.complement, cases=sj.rows)

- each family of claims is a module ``rankwall.<family>`` (``rankwall.softmax_jacobian``, for
  instance: each module of :mod:`rankwall.checks.claims`, found by name) with its case types, its
  ``Cases`` bundles (strategies, witnesses, random instances) and its quantities;
- :func:`declare` states a claim from two quantities and a relation; :func:`quantity` defines a new
  quantity; :func:`minimum`, :func:`maximum` combine them;
- :func:`get_claim`, :func:`check`, :func:`search`, :func:`load_claims`, :func:`case_from_json`,
  :func:`backend` reach the registry, one verdict, the counterexample search, a user's file of
  claims, a saved case, and an array backend;
- :mod:`rankwall.testing` is the pytest plugin (``assert_holds`` and the ``rankwall_backend`` fixture).

The distribution installs three packages: this one, :mod:`rankwall.theory` (the mathematics, from
the top-level folder ``theory/``) and :mod:`rankwall.checks` (verdicts, certificates, search, models
and the command line, from ``checks/``). Names are imported on first use, so that importing
``rankwall`` (as the pytest plugin does in every test run) stays cheap.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
from fractions import Fraction
from typing import Any

from rankwall.errors import InputError

#: Public names and the modules that define them (imported on first use).
_EXPORTS = {
    "declare": "rankwall.checks.engine.quantities",
    "quantity": "rankwall.checks.engine.quantities",
    "minimum": "rankwall.checks.engine.quantities",
    "maximum": "rankwall.checks.engine.quantities",
    "sqrt": "rankwall.checks.engine.quantities",
    "log": "rankwall.checks.engine.quantities",
    "exp": "rankwall.checks.engine.quantities",
    "Interval": "rankwall.checks.engine.quantities",
    "Measured": "rankwall.checks.engine.quantities",
    "Context": "rankwall.checks.engine.quantities",
    "Quantity": "rankwall.checks.engine.quantities",
    "Cases": "rankwall.checks.engine.toolkit",
    "Case": "rankwall.checks.engine.verdict",
    "Claim": "rankwall.checks.engine.verdict",
    "Verdict": "rankwall.checks.engine.verdict",
    "Status": "rankwall.checks.engine.verdict",
    "OutsideDomain": "rankwall.checks.engine.verdict",
    "case_from_json": "rankwall.checks.engine.verdict",
    "load_claims": "rankwall.checks.run.loader",
    "SearchResult": "rankwall.checks.run.search",
}

__all__ = ["InputError", "backend", "check", "get_claim", "search", *sorted(_EXPORTS)]


class _FamilyAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import rankwall.<family>`` (and ``from rankwall.<family> import norm``) finds the family's
    module, ``rankwall.checks.claims.<family>``: the same module object, so one registry."""

    RESERVED = frozenset({"checks", "theory", "testing", "errors"})

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        head, _, name = fullname.partition(".")
        if head != "rankwall" or not name or "." in name or name in self.RESERVED or name.startswith("_"):
            return None
        if importlib.util.find_spec(f"rankwall.checks.claims.{name}") is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        return None

    def exec_module(self, module: Any) -> None:
        import sys

        name = module.__name__.partition(".")[2]
        sys.modules[module.__name__] = importlib.import_module(f"rankwall.checks.claims.{name}")


def _install_family_alias() -> None:
    import sys

    if not any(isinstance(finder, _FamilyAlias) for finder in sys.meta_path):
        sys.meta_path.append(_FamilyAlias())


_install_family_alias()


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    family = f"rankwall.checks.claims.{name}"
    if not name.startswith("_") and importlib.util.find_spec("rankwall.checks.claims") is not None:
        if importlib.util.find_spec(family) is not None:
            return importlib.import_module(family)
    raise AttributeError(f"module 'rankwall' has no attribute {name!r}")


def get_claim(claim_id: str) -> Any:
    """The registered claim ``claim_id`` (a shipped one, a loaded one, or a mutant ``id[name]``)."""
    from rankwall.checks.engine.verdict import REGISTRY
    from rankwall.checks.run.loader import load_entry_points

    load_entry_points()
    try:
        return REGISTRY[claim_id]
    except KeyError as error:
        raise InputError(str(error.args[0])) from None


def backend(name: str = "numpy", device: str | None = None, dtype: str = "float64") -> Any:
    """The array backend a claim computes in: ``numpy``, ``torch``, ``cupy`` or ``array-api-strict``,
    on a device (``cpu``, ``cuda``) and in a dtype (``float64`` or ``float32``)."""
    from rankwall.checks.engine.backends import BackendUnavailable, resolve

    try:
        return resolve(name, device, dtype)
    except BackendUnavailable as error:
        raise InputError(str(error)) from None


def _claim(claim: Any) -> Any:
    return get_claim(claim) if isinstance(claim, str) else claim


def check(claim: Any, case: Any, on: Any = None, tighten: Fraction | int | str = 1) -> Any:
    """The :class:`Verdict` of ``claim`` (an id or a claim) on one case, in backend ``on`` (NumPy
    float64 by default), its bound multiplied by ``tighten``."""
    return _claim(claim).check(case, on or backend(), Fraction(tighten))


def search(claim: Any, budget: int = 300, tighten: Fraction | int | str = 1, on: Any = None, seed: int = 0) -> Any:
    """Hunt a counterexample to ``claim`` with Hypothesis (:func:`rankwall.checks.run.search.search`):
    ``budget`` examples, the bound multiplied by ``tighten``, in backend ``on``; no example database."""
    from rankwall.checks.run.search import search as run

    return run(_claim(claim), on or backend(), tighten=Fraction(tighten), budget=budget, seed=seed)
