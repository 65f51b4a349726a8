"""rankwall.checks (installed from the top-level folder ``checks/``). Imported by its own name from a
checkout's root, it would be a second copy of the package with its own, empty registry of claims: that
import is refused, with the name to use instead."""

if __name__ == "checks":
    raise ImportError(
        "import rankwall.checks, not checks: the folder checks/ installs as rankwall.checks "
        "(pip install -e . from the checkout's root, then import rankwall.checks)"
    )
