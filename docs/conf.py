"""Sphinx configuration of the rankwall proof companion.

Offline by construction: MathJax comes from the ``sphinx-mathjax-offline`` package and is copied
into the build (``_static/mathjax``), so no page loads a remote script; the theorem numbers come
from the statement index (``_ext/companion.py``), the bibliography from ``references.bib``, and
the version on every page from the installed package's metadata.
"""

import sys
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

project = "rankwall"
author = "rankwall developers"
release = metadata.version("rankwall")
version = release
extensions = [
    "myst_parser",
    "sphinx_proof",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",
    "sphinxcontrib.bibtex",
    "companion",
]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "conftest.py", "README.md", "_ext"]
templates_path = ["_templates"]
html_theme = "alabaster"
html_title = f"rankwall {release}: the softmax bottleneck, checked"
html_static_path = ["_static/css"]
html_css_files = ["companion.css"]
nitpicky = False

# MathJax 3.2.2 from the package, SVG output: glyphs are paths inside the script, so a page opened
# from disk renders without fetching fonts. Without the noundefined package, an unknown macro is a
# visible error (mjx-merror) that scripts/check_rendered_math.py counts, not silent red text.
mathjax_path = "mathjax/tex-svg.js"
mathjax3_config = {"tex": {"packages": {"[-]": ["noundefined"]}}, "svg": {"fontCache": "global"}}

bibtex_bibfiles = ["references.bib"]
bibtex_default_style = "plain"
bibtex_reference_style = "author_year"


def setup(app: object) -> None:
    """sphinx-mathjax-offline sets its CHTML renderer when it loads; this runs after it."""
    app.config.mathjax_path = mathjax_path
