"""Run every code block of the docs under pytest (Sybil): a page's numbers are printed by code."""

from doctest import ELLIPSIS, NORMALIZE_WHITESPACE
from pathlib import Path

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
