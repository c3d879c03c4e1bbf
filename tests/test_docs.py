"""The documentation site: ``make docs`` (Sphinx, warnings as errors) and what a browser shows.

The site is built once per session into a temporary directory with ``-W --keep-going`` (the
same command as ``make docs``, other output directory). Pages are then opened in headless
Chromium (``chromium --headless --dump-dom``: the DOM after the page's scripts ran) and checked
for their content: the API page of :func:`convkit.simulate` shows its signature, the API index
lists every name of ``import convkit as ck``, a gallery page shows a known figure and the
verdicts of its checks, and a theory page states its results.

Chromium comes from the system packages (``.ci/run`` installs it) and the local MathJax 4 from
npm (``make mathjax``, run by ``make test``); without either the tests that need it fail,
saying how to install it.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import myst_nb  # noqa: F401  (the test extra installs the documentation stack)
import pytest
import sphinx  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _sphinx_build(out: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q"]
    cmd += ["-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs")
    proc = _sphinx_build(out)
    assert proc.returncode == 0, f"sphinx -W failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    return out / "html"


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail(
            "headless Chromium not found: the browser tests need it (sudo apt-get install -y "
            "chromium, or the chromium-browser package; .ci/run installs it, see README.md)"
        )
    return exe


def dom(page: Path, tmp_path: Path, wait_ms: int = 0) -> str:
    """The DOM of ``page`` after Chromium rendered it (scripts run; ``wait_ms`` of virtual
    time for asynchronous ones such as MathJax)."""
    assert page.exists(), f"page not built: {page}"
    cmd = [
        _chromium(),
        "--headless",
        *([f"--virtual-time-budget={wait_ms}"] if wait_ms else []),
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--dump-dom",
        page.as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "<html" in proc.stdout, "Chromium returned no document"
    return proc.stdout


def _text(html: str) -> str:
    """Visible text of an HTML document (tags dropped, whitespace collapsed)."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", html)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return " ".join(text.split())


def test_site_pages_exist(site):
    for page in ("index", "api/index", "theory/index", "gallery/index", "notebooks/index"):
        assert (site / f"{page}.html").exists(), page
    for page in ("architecture", "adding", "own_claim", "getting_started"):
        assert (site / f"{page}.html").exists(), page
    for nb in (REPO / "notebooks").glob("*.ipynb"):
        assert (site / "notebooks" / f"{nb.stem}.html").exists(), nb.stem


def test_api_page_renders_simulate_signature(site, tmp_path):
    import convkit as ck

    text = _text(dom(site / "api" / "convkit.simulate.html", tmp_path))
    assert "convkit.simulate. simulate (" in text or "convkit.simulate.simulate(" in text.replace(
        " ", ""
    )
    # every keyword of the real signature is on the page, in the signature or its parameters
    for name in inspect.signature(ck.simulate).parameters:
        assert name in text, f"parameter {name!r} of simulate missing from its API page"
    summary = " ".join((inspect.getdoc(ck.simulate) or "").split("\n\n")[0].split())
    summary = summary.replace("``", "")  # inline literals render without their backquotes
    assert summary[:40] in text, "the docstring of simulate is not on its API page"


def test_api_page_lists_exactly_the_parameters_of_simulate(site):
    """The Parameters list of simulate's page names each parameter of the signature once, in
    order (prose once parsed as eleven more "parameters", and ``n_record`` was missing)."""
    import convkit as ck

    html = (site / "api" / "convkit.simulate.html").read_text()
    html = html[html.index('id="convkit.simulate.simulate"') :]
    m = re.search(
        r'<dt class="field-\w+">Parameters.*?</dt>\s*<dd class="field-\w+">(.*?)</dd>',
        html,
        flags=re.S,
    )
    assert m, "no Parameters list on simulate's page"
    listed = re.findall(r"<li><p><strong>([^<]+)</strong>", m.group(1))
    assert listed == list(inspect.signature(ck.simulate).parameters)


def test_api_index_lists_every_public_name(site, tmp_path):
    import convkit as ck

    text = _text(dom(site / "api" / "index.html", tmp_path))
    names = [n for n in ck.__all__ if n != "__version__"] + list(ck._LAZY_NAMES)
    missing = [n for n in names if f"ck.{n}" not in text]
    assert not missing, f"names of convkit missing from the API index: {missing}"


def test_every_public_module_has_a_page(site):
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        api = importlib.import_module("convkit_api")
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    for mod in api.public_modules():
        page = site / "api" / f"{mod}.html"
        assert page.exists(), mod
        html = page.read_text()
        for n in api.public_names(mod):
            assert n in html, f"{mod}.{n} missing from {page.name}"


def test_gallery_page_shows_figure_and_verdicts(site, tmp_path):
    checks = json.loads((REPO / "figures" / "checks.json").read_text())
    name = "decentralized_bits" if "decentralized_bits" in checks else sorted(checks)[0]
    html = dom(site / "gallery" / f"{name}.html", tmp_path)
    pngs = sorted(p.name for p in (REPO / "figures").glob(f"{name}*.png"))
    assert pngs
    imgs = re.findall(r"<img\b[^>]*\bsrc=\"([^\"]+)\"", html)
    assert any(src.endswith(pngs[0]) for src in imgs), (pngs[0], imgs)
    # the image file the page points to was copied into the site
    src = next(s for s in imgs if s.endswith(pngs[0]))
    assert (site / "gallery" / src).resolve().exists()
    text = _text(html)
    for row in checks[name]:
        assert row["verdict"] in text
    assert "None" not in text and "np.float64" not in text
    index = _text(dom(site / "gallery" / "index.html", tmp_path))
    for other in checks:
        assert other in index


def test_gallery_tables_round_numbers(site):
    checks = json.loads((REPO / "figures" / "checks.json").read_text())
    floats = [
        r["measured"] for rows in checks.values() for r in rows if type(r["measured"]) is float
    ]
    for name in checks:
        text = _text((site / "gallery" / f"{name}.html").read_text())
        assert "np.float64" not in text and " None " not in f" {text} "
    for v in floats:  # a raw float of the JSON never reaches the page unrounded
        if len(repr(v)) > 8:
            assert repr(v) not in " ".join(
                (site / "gallery" / f"{n}.html").read_text() for n in checks
            )


def test_theory_pages_state_every_result(site, tmp_path):
    from convkit.bounds import LIBRARY, get, names

    pages: dict[str, str] = {}
    for n in names():
        topic = LIBRARY[n].__module__.rsplit(".", 1)[-1]
        if topic not in pages:
            pages[topic] = (site / "theory" / f"{topic}.html").read_text()
        html = pages[topic]
        assert n in html, f"result {n} missing from theory/{topic}.html"
        res = get(n)
        assert res.provenance.split(":")[0][:20] in _text(html)
    text = _text(dom(site / "theory" / "sgd_stability.html", tmp_path))
    assert "sgd.ms_stability.1d" in text and "derived here" in text
    assert "Derivation" in text and "def derive_stability_limit_1d" in text


def test_theory_maths_rendered(site, tmp_path):
    """With the local MathJax (``make mathjax``) the statements are typeset in the browser."""
    _require_local_mathjax()
    html = dom(site / "theory" / "sgd_stability.html", tmp_path, wait_ms=20000)
    typeset = html.count("<mjx-container")
    raw = html.count('class="math notranslate nohighlight"')
    assert raw > 0, "no maths on the page"
    assert typeset >= raw, f"{typeset} of {raw} formulas typeset"


def _require_local_mathjax() -> None:
    if not (DOCS / "_static" / "mathjax4" / "tex-svg.js").exists():
        pytest.fail("no local MathJax 4: run `make mathjax` (npm; `make test` does it)")


#: Appended to a copy of a page: once MathJax has typeset every displayed formula, writes the
#: box of each (its widest rendered piece against the article column, its own scroll width)
#: as JSON into ``<pre id="formula-boxes">``.
_FORMULA_BOXES_JS = """<script>
(function () {
  var tries = 0;
  function report() {
    var column = document.querySelector('article.bd-article').getBoundingClientRect();
    var boxes = [];
    document.querySelectorAll('div.math').forEach(function (div) {
      var c = div.querySelector('mjx-container');
      var box = {typeset: !!c, tex: div.textContent.slice(0, 80)};
      if (c) {
        var right = -Infinity;
        c.querySelectorAll('svg').forEach(function (s) {
          right = Math.max(right, s.getBoundingClientRect().right);
        });
        box.right_past_column = right - column.right;
        box.scroll_width = Math.max(c.scrollWidth, div.scrollWidth);
        box.client_width = Math.min(c.clientWidth, div.clientWidth);
        box.height = c.getBoundingClientRect().height;
      }
      boxes.push(box);
    });
    var pre = document.createElement('pre');
    pre.id = 'formula-boxes';
    pre.textContent = JSON.stringify(boxes);
    document.body.appendChild(pre);
  }
  function poll() {
    var all = document.querySelectorAll('div.math').length;
    var done = document.querySelectorAll('div.math mjx-container').length;
    if (done >= all || tries++ > 150) { setTimeout(report, 300); } else { setTimeout(poll, 200); }
  }
  window.addEventListener('load', function () { setTimeout(poll, 200); });
})();
</script>"""


def formula_boxes(page: Path, tmp_path: Path, width: int = 1280) -> list[dict]:
    """The displayed formulas of ``page`` as Chromium lays them out in a ``width`` pixel
    window after MathJax: per formula, whether it was typeset, how far its rendering reaches
    past the right edge of the article column (pixels; <= 0 inside) and its container's
    scroll and client widths (a scroll width above the client width hides part of it)."""
    probe = page.with_name(f"_formula_boxes_{page.name}")
    probe.write_text(page.read_text().replace("</body>", _FORMULA_BOXES_JS + "</body>"))
    cmd = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},900",
        "--virtual-time-budget=30000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--dump-dom",
        probe.as_uri(),
    ]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    finally:
        probe.unlink()
    m = re.search(r'<pre id="formula-boxes">(.*?)</pre>', out, re.S)
    assert m, f"no formula report from {page.name}"
    return json.loads(m.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


@pytest.mark.parametrize("width", [1280, 900])
def test_long_formulas_wrap_within_the_column(site, tmp_path, width):
    """Every displayed formula of the theory pages stays inside the article column, whole:
    nothing reaches past the column's edge and nothing hides behind a scroll bar (statements
    such as ``local_sgd_large_steps.rounds_needed`` are 1600 pixels wide on one line; MathJax 4
    breaks them into lines). Checked at two window widths."""
    _require_local_mathjax()
    pages = sorted(p for p in (site / "theory").glob("*.html") if p.name != "index.html")
    assert len(pages) >= 5
    problems, n = [], 0
    for page in pages:
        for box in formula_boxes(page, tmp_path, width):
            n += 1
            if not box["typeset"]:
                problems.append(f"{page.name}: not typeset: {box['tex']}")
            elif box["right_past_column"] > 1 or box["scroll_width"] > box["client_width"] + 1:
                problems.append(
                    f"{page.name}: {box['right_past_column']:.0f} px past the column, "
                    f"scroll width {box['scroll_width']} > {box['client_width']}: {box['tex']}"
                )
    assert n >= 20, f"only {n} displayed formulas on the theory pages"
    assert not problems, "\n".join(problems)


def _warnings_of(docstring: str) -> list[str]:
    """reStructuredText problems (level >= WARNING) of a docstring after napoleon."""
    from docutils.core import publish_doctree
    from docutils.utils import Reporter
    from sphinx.ext.napoleon import Config
    from sphinx.ext.napoleon.docstring import NumpyDocstring

    text = str(NumpyDocstring(docstring, Config(napoleon_use_ivar=True, napoleon_use_rtype=False)))
    text = re.sub(r":[\w:]+:`", "`", text)  # Sphinx roles are not docutils roles
    text = re.sub(r"^\.\. \w+::.*$", "", text, flags=re.M)
    doctree = publish_doctree(
        text, settings_overrides={"report_level": Reporter.SEVERE_LEVEL + 1, "halt_level": 5}
    )
    return [
        m.astext()
        for m in doctree.findall()
        if m.tagname == "system_message" and m["level"] >= Reporter.WARNING_LEVEL
    ]


def test_verbatim_docstrings_are_still_broken():
    """Each entry of ``DOCSTRING_VERBATIM`` names a real object whose docstring still breaks
    the rules; an entry whose docstring was fixed must be removed from docs/conf.py."""
    conf: dict = {"__file__": str(DOCS / "conf.py")}
    exec(compile((DOCS / "conf.py").read_text(), str(DOCS / "conf.py"), "exec"), conf)
    for path in conf["DOCSTRING_VERBATIM"]:
        try:
            obj = importlib.import_module(path)
        except ImportError:
            mod, _, attr = path.rpartition(".")
            obj = getattr(importlib.import_module(mod), attr)
        problems = _warnings_of(inspect.getdoc(obj) or "")
        assert problems, f"{path} now parses cleanly: remove it from DOCSTRING_VERBATIM"


@pytest.mark.parametrize(
    "path", ["convkit.sweep.runner.run", "convkit.bounds.local_sgd_large_steps"]
)
def test_formerly_verbatim_docstrings_parse_cleanly(path):
    """The docstrings once shown verbatim (a Parameters section swallowing free text; a
    definition list ending inside a literal) now parse without reStructuredText problems."""
    try:
        obj = importlib.import_module(path)
    except ImportError:
        mod, _, attr = path.rpartition(".")
        obj = getattr(importlib.import_module(mod), attr)
    assert _warnings_of(inspect.getdoc(obj) or "") == []


def test_warning_detector_can_fail():
    assert _warnings_of("Title\n\n*unclosed emphasis\n")
    assert not _warnings_of("A clean line.\n\nParameters\n----------\nx : int\n    A value.\n")


_CODE_BOXES_JS = r"""<script>
window.addEventListener('load', function () {
  setTimeout(function () {
    var article = document.querySelector('.bd-article-container') || document.body;
    var column = document.querySelector('article.bd-article') || article;
    var right = column.getBoundingClientRect().right;
    var boxes = [];
    document.querySelectorAll('div.highlight').forEach(function (div) {
      var pre = div.querySelector('pre');
      boxes.push({
        right_past_column: div.getBoundingClientRect().right - right,
        pre_scroll: pre ? pre.scrollWidth : 0,
        pre_client: pre ? pre.clientWidth : 0,
        first_line: pre ? pre.textContent.split('\n')[0].slice(0, 60) : ''
      });
    });
    var report = {article_scroll: article.scrollWidth, article_client: article.clientWidth,
                  boxes: boxes};
    var out = document.createElement('pre');
    out.id = 'code-boxes';
    out.textContent = JSON.stringify(report);
    document.body.appendChild(out);
  }, 300);
});
</script>"""


def code_boxes(page: Path, tmp_path: Path, width: int) -> dict:
    """The code blocks of ``page`` as Chromium lays them out in a ``width`` pixel window: per
    block how far it reaches past the article column's right edge and its ``pre``'s scroll
    and client widths, and the article container's scroll and client widths."""
    probe = page.with_name(f"_code_boxes_{page.name}")
    probe.write_text(page.read_text().replace("</body>", _CODE_BOXES_JS + "</body>"))
    cmd = [
        _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        f"--window-size={width},900", "--virtual-time-budget=5000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}", "--dump-dom", probe.as_uri(),
    ]  # fmt: skip
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    finally:
        probe.unlink()
    m = re.search(r'<pre id="code-boxes">(.*?)</pre>', out, re.S)
    assert m, f"no code-block report from {page.name}"
    return json.loads(m.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


@pytest.mark.parametrize("width", [1280, 500])
def test_code_blocks_of_the_own_claim_page_show_every_character(site, tmp_path, width):
    """The own-claim page's code blocks (up to 94 characters a line) show all of their text
    inside the article column: nothing reaches past the column's right edge, the article does
    not scroll as a whole, and no block hides part of a line behind its own scroll bar (which
    overlay scroll bars do not show until one scrolls: the line looked cut at the right
    edge; the blocks wrap). Checked at two window widths."""
    report = code_boxes(site / "own_claim.html", tmp_path, width)
    assert len(report["boxes"]) >= 3
    past = [b for b in report["boxes"] if b["right_past_column"] > 1]
    assert not past, past
    assert report["article_scroll"] <= report["article_client"] + 1, report
    hidden = [b for b in report["boxes"] if b["pre_scroll"] > b["pre_client"] + 1]
    assert not hidden, hidden
