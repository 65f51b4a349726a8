"""The import contract between the layers (issue 27), read from the source with :mod:`ast` (every
``import`` statement, at module level or inside a function): import-linter cannot see this layout,
whose ``theory/`` and ``checks/`` folders install as ``rankwall.theory`` and ``rankwall.checks``
through ``package-dir``.

- ``theory/`` is mathematics: it imports neither ``rankwall.checks`` nor the testing machinery, and
  nothing heavy at module level (python-flint, torch, hypothesis only inside a function);
- each layer of ``checks/`` (a sub-package: engine, exact, run, claims, cli, models, experiments,
  companion) imports nothing from the layers above it (:data:`ABOVE`);
- ``rankwall/errors.py`` imports nothing but the standard library.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Each layer of checks/ (a sub-package) and the layers above it that it must not import.
ABOVE = {
    "engine": ("claims", "cli", "run", "models", "experiments", "companion"),
    "exact": ("claims", "cli", "run", "models", "experiments", "companion"),
    "run": ("claims", "cli", "models", "experiments", "companion"),
    "claims": ("cli", "run", "models", "experiments", "companion.fidelity"),
}
#: The imports across a layer's ceiling that are allowed, and why: discovery, not use
#: (``REGISTRY`` imports the shipped families on its first read, to register their claims and case types).
DISCOVERY = {("engine/verdict.py", "rankwall.checks.claims")}
ENGINE_CEILING = tuple(f"rankwall.checks.{above}" for above in ABOVE["engine"])
NOT_IN_THEORY = ("rankwall.checks", "rankwall.testing", "hypothesis")
NOT_AT_THEORY_TOP_LEVEL = ("flint", "torch", "hypothesis", "transformers", "cupy")
STANDARD_LIBRARY_ONLY = ("__future__", "typing", "collections", "dataclasses")


def imports(source: str, package: str) -> list[tuple[str, bool]]:
    """Every module ``source`` imports (relative imports resolved against ``package``), with whether the
    import is at module level."""
    tree = ast.parse(source)
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top_level) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found += [(base, id(node) in top_level)]
            found += [(f"{base}.{alias.name}", id(node) in top_level) for alias in node.names]
    return found


def violations(path: Path, package: str, forbidden: tuple[str, ...], top_level_only: bool = False) -> list[str]:
    def under(name: str, prefix: str) -> bool:
        return name == prefix or name.startswith(prefix + ".")

    return [
        f"{path.relative_to(ROOT)} imports {name}"
        for name, at_top in imports(path.read_text(encoding="utf-8"), package)
        if (at_top or not top_level_only) and any(under(name, prefix) for prefix in forbidden)
    ]


def test_theory_imports_no_checks():
    found = [
        v
        for path in sorted((ROOT / "theory").rglob("*.py"))
        for v in violations(path, "rankwall.theory", NOT_IN_THEORY)
    ]
    assert not found, found


def test_theory_imports_nothing_heavy_at_module_level():
    found = [
        v
        for path in sorted((ROOT / "theory").rglob("*.py"))
        for v in violations(path, "rankwall.theory", NOT_AT_THEORY_TOP_LEVEL, top_level_only=True)
    ]
    assert not found, found


@pytest.mark.parametrize("layer", list(ABOVE))
def test_a_layer_imports_nothing_above_it(layer):
    forbidden = tuple(f"rankwall.checks.{above}" for above in ABOVE[layer])
    found = []
    for path in sorted((ROOT / "checks" / layer).rglob("*.py")):
        where = path.relative_to(ROOT / "checks").as_posix()
        package = "rankwall.checks." + ".".join(path.relative_to(ROOT / "checks").parent.parts)
        found += [v for v in violations(path, package, forbidden) if (where, v.rsplit(" ", 1)[1]) not in DISCOVERY]
    assert not found, found


def test_every_layer_is_a_folder():
    """The layers named in the contract exist, and checks/ has no module left outside a layer."""
    assert all((ROOT / "checks" / layer).is_dir() for layer in ABOVE)
    loose = sorted(p.name for p in (ROOT / "checks").glob("*.py") if p.name != "__init__.py")
    assert not loose, loose


def test_the_errors_import_only_the_standard_library():
    names = {name.split(".")[0] for name, _ in imports((ROOT / "rankwall" / "errors.py").read_text(), "rankwall")}
    assert names <= set(STANDARD_LIBRARY_ONLY), names


def test_the_contract_fails_on_a_planted_upward_import(tmp_path):
    """The contract can fail: an engine module that imports a family, a theory module that imports
    checks (relatively or by name, at any depth), a heavy import at a theory module's top level."""
    checks = {
        "def f():\n    from rankwall.checks.claims import softmax_jacobian\n": (
            "rankwall.checks.engine",
            ENGINE_CEILING,
        ),
        "from ..claims import heads\n": ("rankwall.checks.engine", ENGINE_CEILING),
        "from ..checks import verdict\n": ("rankwall.theory", NOT_IN_THEORY),
        "import rankwall.checks.exact as exact\n": ("rankwall.theory", NOT_IN_THEORY),
    }
    for source, (package, forbidden) in checks.items():
        names = [name for name, _ in imports(source, package)]
        assert any(name.startswith(forbidden) for name in names), (source, names)
    heavy = [name for name, top in imports("import flint\ndef f():\n    import torch\n", "rankwall.theory") if top]
    assert heavy == ["flint"]


def test_the_registry_loads_the_shipped_families_on_first_read():
    """A reader needs no ``import rankwall.checks.claims`` first (a docs page, a user's script): the
    registry imports the families on its first read, and registering alone does not."""
    import subprocess
    import sys

    for first_read in ("'softmax-jacobian.trace' in REGISTRY", "REGISTRY['softmax-jacobian.trace'].id > ''"):
        probe = (
            "import sys; from rankwall.checks.engine.verdict import REGISTRY; "
            "before = 'rankwall.checks.claims' in sys.modules; "
            f"print(before, {first_read}, len(REGISTRY) > 30)"
        )
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        assert result.stdout.split() == ["False", "True", "True"], first_read
