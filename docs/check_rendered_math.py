"""Does the built companion render its mathematics offline? Open pages of an HTML build in headless
Chromium, with every host name unresolvable, let MathJax run, and count what is left:

- *unrendered*: a math element of the page (``span.math`` / ``div.math``, which Sphinx fills with
  ``\\(...\\)`` or ``\\[...\\]``) that holds no ``mjx-container`` after rendering, i.e. raw TeX;
- *errors*: ``mjx-merror`` elements, formulas MathJax could not parse (``docs/conf.py`` drops the
  ``noundefined`` package, so an unknown macro is an error, not silent red text).

Usage: ``python docs/check_rendered_math.py BUILD_DIR [PAGE.html ...]`` (default: the softmax
Jacobian and the prediction-error pages). Exit codes: 0 every formula rendered, 1 raw TeX or a
parse error on some page, 2 bad usage, 3 no Chromium found (nothing was checked).

``remote_loads`` is the static half of the check: the scripts, style sheets and frames that a built
page would fetch from another host.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

DEFAULT_PAGES = ("softmax_jacobian.html", "error_rank.html")
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: virtual milliseconds MathJax gets to typeset a page; headless Chromium stops the clock when idle
TYPESET_BUDGET_MS = 30_000


def find_chromium() -> str | None:
    """The first Chromium on PATH, or None."""
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


def _is_remote(url: str) -> bool:
    return url.strip().lower().startswith(("http://", "https://", "//"))


class _RemoteLoads(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag in ("script", "iframe", "img") and _is_remote(a.get("src", "")):
            self.found.append(f"<{tag} src={a['src']}>")
        if tag == "link" and "stylesheet" in a.get("rel", "") and _is_remote(a.get("href", "")):
            self.found.append(f"<link href={a['href']}>")


def remote_loads(html: str) -> list[str]:
    """Every script, frame, image or style sheet that the page loads from another host."""
    parser = _RemoteLoads()
    parser.feed(html)
    return parser.found


class _MathCount(HTMLParser):
    """Counts math elements, those holding an mjx-container, and mjx-merror elements."""

    def __init__(self) -> None:
        super().__init__()
        self.math = self.rendered = self.errors = 0
        self.raw: list[str] = []
        self._stack: list[dict] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "mjx-merror":
            self.errors += 1
        if tag == "mjx-container":
            for frame in self._stack:
                frame["rendered"] = True
        if tag in ("span", "div") and "math" in classes:
            self.math += 1
            self._stack.append({"tag": tag, "depth": 0, "rendered": False, "text": ""})
        elif self._stack and tag == self._stack[-1]["tag"]:
            self._stack[-1]["depth"] += 1

    def handle_endtag(self, tag: str) -> None:
        if not self._stack or tag != self._stack[-1]["tag"]:
            return
        frame = self._stack[-1]
        if frame["depth"]:
            frame["depth"] -= 1
            return
        self._stack.pop()
        if frame["rendered"]:
            self.rendered += 1
        else:
            self.raw.append(" ".join(frame["text"].split())[:80])

    def handle_data(self, data: str) -> None:
        if self._stack:
            self._stack[-1]["text"] += data


@dataclass(frozen=True)
class PageReport:
    page: str
    math: int
    rendered: int
    errors: int
    raw: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.math > 0 and self.rendered == self.math and self.errors == 0


def render(page: Path, chromium: str, budget_ms: int = TYPESET_BUDGET_MS) -> str:
    """The page's DOM after its scripts ran, with no host name resolvable (so nothing remote loads)."""
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--virtual-time-budget={budget_ms}",
        "--dump-dom",
        page.resolve().as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"chromium exited {result.returncode}: {result.stderr[-500:]}")
    return result.stdout


def check_page(page: Path, chromium: str) -> PageReport:
    count = _MathCount()
    count.feed(render(page, chromium))
    return PageReport(page.name, count.math, count.rendered, count.errors, tuple(count.raw))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", type=Path, help="an HTML build of the docs (sphinx -b html docs BUILD)")
    parser.add_argument("pages", nargs="*", default=list(DEFAULT_PAGES), help="pages to open (default: two)")
    parser.add_argument("--chromium", help="the browser (default: the first Chromium on PATH)")
    args = parser.parse_args(argv)
    missing = [p for p in args.pages if not (args.build / p).is_file()]
    if missing:
        print(f"check_rendered_math: build: no page {', '.join(missing)} in {args.build}", file=sys.stderr)
        return 2
    chromium = args.chromium or find_chromium()
    if chromium is None:
        print("check_rendered_math: no Chromium on PATH (apt-get install chromium); nothing checked")
        return 3
    reports = [check_page(args.build / p, chromium) for p in args.pages]
    for r in reports:
        print(
            f"{r.page}: {r.rendered} of {r.math} formulas rendered, {r.errors} parse errors"
            + (f"; raw TeX, first: {r.raw[0]!r}" if r.raw else "")
        )
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
