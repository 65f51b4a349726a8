"""Writing a run's results: a JSON record and a PNG figure side by side, never half-written."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rankwall.theory.validation import InputError


def writable_folder(folder: str | Path, argument: str = "--out") -> Path:
    """``folder``, created if needed, after checking that a file can be written in it (so that a
    long run does not fail at its end)."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise InputError(f"{argument}: {path} exists and is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".rankwall-probe-"):
            pass
    except OSError as error:
        raise InputError(f"{argument}: cannot write in {path} ({error.strerror or error})") from None
    return path


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target`` that replaces it only if the block succeeds."""
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=target.suffix)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        temporary.replace(target)
    finally:
        temporary.unlink(missing_ok=True)


def write_outputs(data: Any, out: Path, stem: str, plot: Callable[[Any, Path], None]) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.png`` (drawn by ``plot``) into ``out``. Each is written
    under a temporary name and renamed, so a failure leaves neither a partial JSON nor a partial PNG;
    the PNG is drawn first, so a JSON is never left without its figure."""
    out = writable_folder(out)
    json_path, png_path = out / f"{stem}.json", out / f"{stem}.png"
    text = json.dumps(data, indent=2)
    with _replacing(png_path) as temporary:
        plot(data, temporary)
    with _replacing(json_path) as temporary:
        temporary.write_text(text)
    return json_path, png_path


def available_memory_bytes() -> int | None:
    """Memory a new allocation can take without swapping: ``MemAvailable`` of /proc/meminfo where
    there is one, else the physical memory; ``None`` where neither can be read."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return None


def peak_memory_mb() -> float:
    """The process's peak resident memory so far, in MiB (``ru_maxrss``: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def progress_bar(console: Console) -> Progress:
    """A progress bar on ``console`` (stderr), shown only on a terminal and gone when done."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
