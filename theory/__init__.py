"""rankwall.theory (installed from the top-level folder ``theory/``). Imported by its own name from a
checkout's root, it would be a second copy of the package with its own, empty registry of claims: that
import is refused, with the name to use instead."""

if __name__ == "theory":
    raise ImportError(
        "import rankwall.theory, not theory: the folder theory/ installs as rankwall.theory "
        "(pip install -e . from the checkout's root, then import rankwall.theory)"
    )
