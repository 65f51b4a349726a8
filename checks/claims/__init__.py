"""Every family's claims: importing this package imports each module in it, and each module's
``declare`` calls register its claims in :data:`rankwall.checks.engine.verdict.REGISTRY` (which
imports this package on its first read). A new family is a new module here; nothing else lists the
families."""

import importlib
import pkgutil

FAMILY_MODULES = [
    importlib.import_module(f"{__name__}.{module.name}")
    for module in pkgutil.iter_modules(__path__)
    if not module.ispkg
]


def family_name(module: object) -> str:
    """A family module's name as its claim ids spell it (``softmax_jacobian`` -> ``softmax-jacobian``)."""
    return module.__name__.rsplit(".", 1)[-1].replace("_", "-")


def catalog(family: str | None = None) -> list[dict]:
    """Every public quantity of every family (or of ``family``): the name a statement uses
    (``rankwall.<module>.<attribute>``), how it prints, whether it is an integer, what it means, how it
    is evaluated exactly, whether it follows ``--backend``, and the ``Cases`` bundles it reads (those on
    whose witnesses it is measured without an error)."""
    from rankwall.checks.engine.quantities import Base, Context
    from rankwall.checks.engine.toolkit import Cases, numpy_float64
    from rankwall.errors import InputError

    entries = []
    for module in FAMILY_MODULES:
        name = family_name(module)
        if family is not None and family not in (name, module.__name__.rsplit(".", 1)[-1]):
            continue
        public = getattr(module, "__all__", [])
        bundles = [(n, getattr(module, n)) for n in public if isinstance(getattr(module, n), Cases)]
        for attribute in public:
            quantity = getattr(module, attribute)
            if not isinstance(quantity, Base):
                continue
            reads = []
            for bundle_name, cases in bundles:
                try:
                    for case in cases.witnesses(4)[:1]:
                        quantity.measure(Context(case, numpy_float64()))
                except (InputError, AttributeError, TypeError):  # a case this quantity does not read
                    continue
                reads.append(bundle_name)
            entries.append(
                {
                    "family": name,
                    "name": f"rankwall.{module.__name__.rsplit('.', 1)[-1]}.{attribute}",
                    "prints": quantity.name,
                    "integer": quantity.integer,
                    "meaning": quantity.doc,
                    "exactly": quantity.exact_doc,
                    "follows_backend": quantity.follows_backend,
                    "cases": reads,
                }
            )
    return entries
