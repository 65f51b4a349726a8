"""Argument types shared by the command line and the experiments' own flags."""

from __future__ import annotations

import argparse
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
