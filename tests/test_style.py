"""The style rules, run with the tests (and so by ``.ci/run``): ``ruff check`` and ``ruff format --check``
over the checkout, with the ruff version the test extra pins."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]], ids=" ".join)
def test_ruff_is_clean(command):
    result = subprocess.run([sys.executable, "-m", "ruff", *command], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]


def test_the_style_check_can_fail(tmp_path):
    """A file ruff would change is reported: the check above is not vacuous."""
    (tmp_path / "bad.py").write_text("import os\nx=1\n")
    for command in (["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]):
        result = subprocess.run([sys.executable, "-m", "ruff", *command], cwd=tmp_path, capture_output=True)
        assert result.returncode == 1, command
