"""Sphinx configuration of the convkit documentation (``make docs``).

The API reference, the theory pages, the figure gallery and the notebook copies are written
at build time (``_ext/convkit_pages``) from the package itself, the bounds registry and
``figures/``, so the site always shows the current code and the committed data.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))

import convkit  # noqa: E402

project = "convkit"
author = "the convkit developers"
copyright = "the convkit developers"
release = convkit.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "myst_nb",
    "convkit_pages",
]

# --- sources -----------------------------------------------------------------------------
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
root_doc = "index"

# --- MyST / notebooks: rendered from their committed outputs, never executed here ---------
nb_execution_mode = "off"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# --- autodoc / napoleon (numpy-style docstrings) ------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_ivar = True  # "Attributes" as fields: no second description of a dataclass field
napoleon_use_rtype = False

# --- output --------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"convkit {release}"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = ["_static"]
html_css_files = ["convkit.css"]
# maths: MathJax 4, local when ``make mathjax`` fetched it (offline pages), else Sphinx's CDN
# default (also version 4). Displayed formulas wider than the text column break into lines
# (version 4's automatic line breaking; long ``\text{...}`` breaks at its spaces) instead of
# running past the column or hiding behind a scroll bar.
if (DOCS / "_static" / "mathjax4" / "tex-svg.js").exists():
    mathjax_path = "mathjax4/tex-svg.js"
mathjax4_config = {"output": {"displayOverflow": "linebreak", "linebreaks": {"width": "100%"}}}

# --- docstrings that do not parse as reStructuredText ------------------------------------
#: Objects (module, class or function paths) whose docstrings break the reStructuredText /
#: numpy-docstring rules, in modules this site does not own. Each is shown verbatim (a
#: literal block) instead of parsed, so that the build stays warning-free while the text is
#: still on the page; the reason says what to fix in the source. Remove an entry once its
#: docstring is fixed (tests/test_docs.py fails on an entry that parses cleanly).
DOCSTRING_VERBATIM: dict[str, str] = {}


def _verbatim_docstring(app, what, name, obj, options, lines):  # noqa: ARG001
    """Replace the parsed lines of a listed docstring by its raw text in a literal block."""
    if name not in DOCSTRING_VERBATIM:
        return
    import inspect

    raw = inspect.getdoc(obj) or ""
    lines[:] = [
        "(Shown verbatim: the source docstring is not valid reStructuredText.)",
        "",
        "::",
        "",
    ]
    lines += ["   " + ln if ln.strip() else "" for ln in raw.splitlines()] + [""]


def setup(app):
    # after napoleon (priority 500), so that the raw text replaces its output
    app.connect("autodoc-process-docstring", _verbatim_docstring, priority=900)
