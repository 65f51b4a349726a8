"""Writing a run's results: a JSON record and a PNG figure side by side, never half-written."""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
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


def _umask() -> int:
    """The process's file-creation mask (read by setting it, then restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _replacing(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target`` that replaces it only if the block succeeds. The file gets
    the permissions a plain ``open`` would give it (0666 less the umask: 0644 under umask 022), not the
    0600 of a temporary file. A folder in the target's place is refused before anything is written."""
    if target.is_dir():
        raise InputError(f"--out: {target} is a folder, where the file {target.name} is to be written")
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=target.suffix)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        temporary.chmod(0o666 & ~_umask())
        temporary.replace(target)
    finally:
        temporary.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` under a temporary name and rename it (never a half-written file)."""
    with _replacing(path) as temporary:
        temporary.write_text(text)
    return path


def write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` under a temporary name and rename it (never a half-written file)."""
    with _replacing(path) as temporary:
        temporary.write_bytes(data)
    return path


def write_array(path: Path, array: Any) -> Path:
    """Write a NumPy array as ``.npy`` (exact binary values) under a temporary name and rename it."""
    with _replacing(path) as temporary, temporary.open("wb") as handle:
        np.save(handle, array, allow_pickle=False)
    return path


def write_figure(path: Path, draw: Callable[[Path], None]) -> Path:
    """Draw a figure into ``path`` (``draw`` saves it to the path it is given) under a temporary name and
    rename it."""
    with _replacing(path) as temporary:
        draw(temporary)
    return path


def write_outputs(data: Any, out: Path, stem: str, plot: Callable[[Any, Path], None]) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.png`` (drawn by ``plot``) into ``out``. Each is written
    under a temporary name and renamed, so a failure leaves neither a partial JSON nor a partial PNG;
    the PNG is drawn first, so a JSON is never left without its figure."""
    out = writable_folder(out)
    json_path, png_path = out / f"{stem}.json", out / f"{stem}.png"
    for path in (json_path, png_path):
        if path.is_dir():
            raise InputError(f"--out: {path} is a folder, where the file {path.name} is to be written")
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


#: Seconds between two plain progress lines when stderr is not a terminal (the first after as long).
PLAIN_PROGRESS_EVERY = 10.0


class PlainProgress:
    """Progress for a log rather than a terminal: a line on stderr every :data:`PLAIN_PROGRESS_EVERY`
    seconds (``verifying: 120/467, softmax-jacobian.psd V=1024, 34 s``), nothing for a short run. It
    offers what the commands use of :class:`rich.progress.Progress`: ``add_task``, ``update``, ``advance``."""

    def __init__(self, console: Console, every: float = PLAIN_PROGRESS_EVERY) -> None:
        self.console = console
        self.every = every
        self.tasks: dict[int, dict[str, Any]] = {}
        self.started = time.monotonic()
        self.last = self.started

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None) -> int:
        task = len(self.tasks)
        self.tasks[task] = {"description": description, "total": total, "completed": 0.0, "title": description}
        return task

    def update(self, task: int, *, description: str | None = None, advance: float = 0.0) -> None:
        if description is not None:
            self.tasks[task]["description"] = description
        if advance:
            self.advance(task, advance)

    def advance(self, task: int, advance: float = 1.0) -> None:
        entry = self.tasks[task]
        entry["completed"] += advance
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            total = "" if entry["total"] in (None, -1) else f"/{int(entry['total'])}"
            where = "" if entry["description"] == entry["title"] else f", {entry['description']}"
            print(
                f"{entry['title']}: {int(entry['completed'])}{total}{where}, {now - self.started:.0f} s",
                file=self.console.file,
                flush=True,
            )


def progress_bar(console: Console) -> Progress | PlainProgress:
    """A progress bar on ``console`` (stderr) on a terminal, gone when done; elsewhere (a pipe, a log,
    CI) a plain line every :data:`PLAIN_PROGRESS_EVERY` seconds."""
    if not console.is_terminal:
        return PlainProgress(console)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def layout_problems(figure: Any) -> list[str]:
    """What a person would see wrong in a drawn figure: tick labels of one axis that overlap each
    other, and a legend drawn over data points. Each problem names the panel and the labels."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    problems = []
    for number, ax in enumerate(figure.axes, 1):
        name = ax.get_title() or f"panel {number}"
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            low, high = sorted(axis.get_view_interval())
            labels = []
            for minor in (False, True):
                ticks = axis.get_minor_ticks() if minor else axis.get_major_ticks()
                for tick in ticks:
                    label = tick.label1
                    if label.get_visible() and label.get_text() and low <= tick.get_loc() <= high:
                        labels.append(label)
            boxes = [(label.get_text(), label.get_window_extent(renderer)) for label in labels]
            for i, (text, box) in enumerate(boxes):
                for other, second in boxes[i + 1 :]:
                    if box.overlaps(second) and box.width > 0 and second.width > 0:
                        problems.append(f"{name}: {which} tick labels {text!r} and {other!r} overlap")
        legend = ax.get_legend()
        if legend is not None:
            box = legend.get_window_extent(renderer)
            inside = 0
            for line in ax.get_lines():
                points = ax.transData.transform(line.get_xydata())
                inside += int(sum(box.contains(x, y) for x, y in points if all(map(math.isfinite, (x, y)))))
            for collection in ax.collections:
                points = collection.get_offset_transform().transform(collection.get_offsets())
                inside += int(sum(box.contains(x, y) for x, y in points if all(map(math.isfinite, (x, y)))))
            if inside:
                problems.append(f"{name}: the legend covers {inside} data points")
    return problems
