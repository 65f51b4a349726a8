"""Argument types shared by the command line and the experiments' own flags."""

from __future__ import annotations

import argparse
import math
from typing import Any


def integer_in(low: int, high: int | None = None) -> Any:
    """An argparse type: an integer in [low, high]. argparse prefixes the flag to the message."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            upper = "" if high is None else f" and <= {high}"
            raise argparse.ArgumentTypeError(f"{value} is out of range (need >= {low}{upper})")
        return value

    return parse


def numbers_in(kind: type, low: float, high: float, *, what: str, low_open: bool = False, name: str = "list") -> Any:
    """An argparse type: a non-empty comma-separated list of numbers of ``kind`` (int or float), each in
    [low, high] (``low_open``: low excluded; NaN never), in the order given."""
    described = "integers" if kind is int else "numbers"
    shown = (lambda x: f"{x:,}") if kind is int else (lambda x: f"{x:g}")
    interval = f"{'(' if low_open else '['}{shown(low)}, {shown(high)}]"

    def parse(text: str) -> tuple[Any, ...]:
        if not text.strip(", "):
            raise argparse.ArgumentTypeError(f"the {name} is empty: give at least one {what}")
        try:
            values = tuple(kind(v) for v in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {described}, got {text!r}") from None
        bad = [v for v in values if not (math.isfinite(v) and (low < v if low_open else low <= v) and v <= high)]
        if bad:
            raise argparse.ArgumentTypeError(f"{shown(bad[0])} is out of range (each {what} in {interval})")
        return values

    return parse
