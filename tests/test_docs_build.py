"""The proof companion builds with Sphinx, warnings as errors (its code blocks run under Sybil
in docs/conftest.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("sphinx_proof")


def test_docs_build_without_warnings(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(ROOT / "docs"), str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "softmax_jacobian.html").exists()


def test_readme_table_lists_every_claim():
    """The README's results table names exactly the registered claims."""
    from rankwall.checks.verdict import REGISTRY

    readme = (ROOT / "README.md").read_text()
    listed = set(re.findall(r"^\| `([a-z0-9.-]+)` \|", readme, flags=re.MULTILINE))
    assert listed == {c.id for c in REGISTRY}


def test_design_page_describes_the_packages_that_exist():
    design = (ROOT / "docs" / "design.md").read_text()
    for module in re.findall(r"`(checks/[a-z_/]+\.py|theory/[a-z_]+\.py)`", design):
        if "<family>" not in module:
            assert (ROOT / module).exists(), module
