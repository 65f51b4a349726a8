"""Writing a run's results: a JSON record and a PNG figure side by side."""

from __future__ import annotations

import json
import resource
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_outputs(data: Any, out: Path, stem: str, plot: Callable[[Any, Path], None]) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.png`` (drawn by ``plot``) into ``out``, creating it."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out / f"{stem}.json", out / f"{stem}.png"
    json_path.write_text(json.dumps(data, indent=2))
    plot(data, png_path)
    return json_path, png_path


def peak_memory_mb() -> float:
    """The process's peak resident memory so far, in MiB (``ru_maxrss``: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10
