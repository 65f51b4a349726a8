"""Run every code block of the docs under pytest (Sybil): a page's numbers are printed by code."""

from doctest import ELLIPSIS, NORMALIZE_WHITESPACE

from sybil import Sybil
from sybil.parsers.myst import PythonCodeBlockParser, SkipParser

pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(doctest_optionflags=ELLIPSIS | NORMALIZE_WHITESPACE), SkipParser()],
    patterns=["*.md"],
    excludes=["_build/*"],
).pytest()
