"""Every family's claims: importing this package imports each module in it, and each module's
:class:`~rankwall.checks.verdict.Family` registers its claims in :data:`rankwall.checks.verdict.REGISTRY`. A new
family is a new module here; nothing else lists the families."""

import importlib
import pkgutil

FAMILY_MODULES = [
    importlib.import_module(f"{__name__}.{module.name}")
    for module in pkgutil.iter_modules(__path__)
    if not module.ispkg
]
