"""Writing a run's results: a JSON record and a PNG figure side by side, never half-written."""

from __future__ import annotations

import contextlib
import itertools
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


@contextlib.contextmanager
def output_folder(out: str | Path, argument: str = "--out") -> Iterator[Path]:
    """The folder ``out``, created if needed and checked writable before the run (so that a long run
    does not fail at its end); if the block fails, the folders this call created are removed again,
    deepest first, each only while it is still empty (a failed run leaves no folder behind, and never
    deletes a file)."""
    path = Path(out).absolute()
    missing = [p for p in (path, *path.parents) if not p.exists()]
    folder = writable_folder(out, argument)
    try:
        yield folder
    except BaseException:
        for created in missing:
            with contextlib.suppress(OSError):  # not empty, or already gone: leave it
                created.rmdir()
        raise


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


def cpu_seconds() -> float:
    """CPU seconds (user and system) of this process, its threads included (torch's intra-op threads),
    and of the children it has waited for: a run's ``cpu_seconds`` is the difference of two readings,
    beside its wall ``seconds``, so that a run on a busy machine shows what it cost."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


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


#: A line is hidden when at least this share of its length lies under another line's stroke.
HIDDEN_SHARE = 0.9
#: Spacing, in pixels, of the points sampled along a line to test whether another line covers it.
SAMPLE_SPACING_PX = 2.0
#: Slack, in pixels, added to a stroke's half-width: antialiasing blurs a line by about a pixel.
STROKE_SLACK_PX = 1.0


def layout_problems(figure: Any) -> list[str]:
    """What a person would see wrong in a drawn figure: tick labels of one axis that overlap each
    other, a legend drawn over data points, a line hidden under another (at least
    :data:`HIDDEN_SHARE` of its length within the other's stroke, see :func:`_hidden_lines`), and a
    bar drawn over a band (an ``axhspan``, ``axvspan`` or other patch that is not a bar). Each problem
    names the panel and the labels."""
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
        problems += [f"{name}: {problem}" for problem in _hidden_lines(ax, figure.dpi)]
        problems += [f"{name}: {problem}" for problem in _bars_over_bands(ax, renderer)]
    return problems


def _label(artist: Any, fallback: str) -> str:
    label = artist.get_label()
    return repr(label) if label and not label.startswith("_") else fallback


def _stroke(line: Any) -> np.ndarray:
    """Points every :data:`SAMPLE_SPACING_PX` pixels along a drawn line (display coordinates; its
    markers alone for a line drawn without a line style)."""
    points = np.asarray(line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float)))
    points = points[np.isfinite(points).all(axis=1)]
    if line.get_linestyle() in ("None", "", " ", "none") or len(points) < 2:
        return points
    samples = [points[:1]]
    for start, end in itertools.pairwise(points):
        steps = max(1, math.ceil(float(np.hypot(*(end - start))) / SAMPLE_SPACING_PX))
        samples.append(start + np.outer(np.arange(1, steps + 1) / steps, end - start))
    return np.concatenate(samples)


def _distance_to_path(points: np.ndarray, path: np.ndarray) -> np.ndarray:
    """The distance of each point to the polyline ``path`` (display coordinates)."""
    if len(path) == 1:
        return np.hypot(*(points - path[0]).T)
    start, end = path[:-1], path[1:]
    direction = end - start
    length2 = np.maximum((direction**2).sum(axis=1), 1e-12)
    along = ((points[:, None, :] - start[None]) * direction[None]).sum(axis=2) / length2[None]
    nearest = start[None] + np.clip(along, 0, 1)[..., None] * direction[None]
    return np.hypot(*(points[:, None, :] - nearest).transpose(2, 0, 1)).min(axis=1)


_NO_LINE = ("None", "", " ", "none")
_NO_MARKER = (None, "None", "", " ", "none")


def _drawn_width(line: Any, dpi: float) -> float:
    """What a line covers across its path, in pixels: its stroke, or its markers where they are wider."""
    stroke = 0.0 if line.get_linestyle() in _NO_LINE else line.get_linewidth()
    marker = 0.0 if line.get_marker() in _NO_MARKER else line.get_markersize()
    return max(stroke, marker) * dpi / 72


def _hidden_lines(ax: Any, dpi: float) -> list[str]:
    """Lines a reader cannot see: line A is hidden by a solid line B when at least
    :data:`HIDDEN_SHARE` of A's length lies within B's stroke (half B's width plus
    :data:`STROKE_SLACK_PX`), A's stroke and markers are no wider than B's stroke, and A is drawn
    under B or has gaps (a dotted line laid on a solid one is lost in it). A solid line drawn over
    another stays visible, and so do markers wider than the line over them, and a line that B covers
    only in part."""
    lines = [line for line in ax.get_lines() if line.get_visible() and len(line.get_xydata())]
    order = {id(artist): i for i, artist in enumerate(ax.get_children())}
    strokes = {id(line): _stroke(line) for line in lines}
    problems = []
    for a in lines:
        points = strokes[id(a)]
        width_a = _drawn_width(a, dpi)
        for b in lines:
            if b is a or b.get_linestyle() not in ("-", "solid"):
                continue
            path = np.asarray(b.get_transform().transform(np.asarray(b.get_xydata(), dtype=float)))
            path = path[np.isfinite(path).all(axis=1)]
            width_b = b.get_linewidth() * dpi / 72
            if len(points) == 0 or len(path) == 0 or width_a > width_b + STROKE_SLACK_PX:
                continue
            above = (a.get_zorder(), order.get(id(a), 0)) > (b.get_zorder(), order.get(id(b), 0))
            if above and a.get_linestyle() in ("-", "solid"):
                continue
            covered = float(np.mean(_distance_to_path(points, path) <= width_b / 2 + STROKE_SLACK_PX))
            if covered >= HIDDEN_SHARE:
                problems.append(
                    f"the line {_label(a, 'unlabelled')} is hidden under the line {_label(b, 'unlabelled')} "
                    f"({covered:.0%} of its length)"
                )
                break
    return problems


def _bars_over_bands(ax: Any, renderer: Any) -> list[str]:
    """Bars that cover part of a band: a patch that is not a bar (``axhspan``, ``axvspan``) and a bar
    whose boxes share more than a pixel of area. A translucent band over an opaque bar is as lost as
    one under it, so the drawing order does not matter."""
    from matplotlib.container import BarContainer

    bars = [
        (bar, f"{_label(container, 'bar')} (bar {number})" if len(container.patches) > 1 else _label(container, "bar"))
        for container in ax.containers
        if isinstance(container, BarContainer)
        for number, bar in enumerate(container.patches, 1)
    ]
    bar_ids = {id(bar) for bar, _ in bars}
    bands = [patch for patch in ax.patches if id(patch) not in bar_ids and patch.get_visible()]
    problems = []
    for band in bands:
        box = band.get_window_extent(renderer)
        for bar, name in bars:
            other = bar.get_window_extent(renderer)
            width = min(box.x1, other.x1) - max(box.x0, other.x0)
            height = min(box.y1, other.y1) - max(box.y0, other.y0)
            if bar.get_visible() and width > 0 and height > 0 and width * height > 1:
                problems.append(f"the {name} covers {width * height:.0f} px² of the band {_label(band, 'unlabelled')}")
    return problems
