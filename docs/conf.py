"""Sphinx configuration of the rankwall proof companion."""

project = "rankwall"
author = "rankwall developers"
extensions = ["myst_parser", "sphinx_proof", "sphinx.ext.mathjax"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "conftest.py", "README.md"]
html_theme = "alabaster"
html_title = "rankwall: the softmax bottleneck, checked"
nitpicky = False
