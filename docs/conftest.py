"""Run every code block of the docs under pytest (Sybil): a page's numbers are printed by code."""

from doctest import ELLIPSIS, NORMALIZE_WHITESPACE
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.parsers.myst import PythonCodeBlockParser, SkipParser


def setup(namespace: dict) -> None:
    """``DOCS``: the docs folder, where recorded runs live under ``_static``."""
    namespace["DOCS"] = Path(__file__).resolve().parent


pytest_collect_file = Sybil(
    setup=setup,
    parsers=[PythonCodeBlockParser(doctest_optionflags=ELLIPSIS | NORMALIZE_WHITESPACE), SkipParser()],
    patterns=["*.md"],
    excludes=["_build/*"],
).pytest()


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``), a page's examples run in order on one worker:
    they share the page's namespace."""
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix == ".md":
            item.add_marker(pytest.mark.xdist_group(path.stem))
