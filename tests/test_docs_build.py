"""The proof companion builds with Sphinx, warnings as errors (its code blocks run under Sybil in
docs/conftest.py), and the built HTML is what a citation needs: no remote script, math that renders
offline (headless Chromium, where one is installed), the version on every page, stable theorem
numbers, and the fidelity table as a real table with links."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

pytest.importorskip("sphinx_proof")
pytest.importorskip("sphinxcontrib.bibtex")


def _load_math_check():
    spec = importlib.util.spec_from_file_location("check_rendered_math", DOCS / "check_rendered_math.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


math_check = _load_math_check()


def sphinx(source: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(source), str(out)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html")
    result = sphinx(DOCS, out)
    assert result.returncode == 0, result.stderr
    return out


def pages(built: Path) -> list[Path]:
    return sorted(p for p in built.glob("*.html") if p.name not in ("genindex.html", "search.html"))


def test_docs_build_without_warnings(built):
    assert (built / "softmax_jacobian.html").exists()


def test_no_built_page_loads_a_remote_script(built):
    for page in built.glob("*.html"):
        assert math_check.remote_loads(page.read_text()) == [], page.name
    assert (built / "_static" / "mathjax" / "tex-svg.js").is_file()


def test_the_remote_check_sees_a_cdn_script():
    html = '<script defer src="https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js"></script>'
    html += '<link rel="stylesheet" href="//example.org/a.css"><script src="_static/local.js"></script>'
    assert math_check.remote_loads(html) == [
        "<script src=https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js>",
        "<link href=//example.org/a.css>",
    ]


def test_every_page_names_the_release(built):
    release = metadata.version("rankwall")
    for page in pages(built):
        assert f'<div class="companion-version">rankwall {release} ' in page.read_text(), page.name


def test_citation_file_names_the_package_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert cff["version"] == metadata.version("rankwall")
    assert cff["title"] and cff["authors"] and cff["message"]
    assert isinstance(cff["date-released"], str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", cff["date-released"])


def test_every_statement_carries_its_stable_number_on_its_page(built):
    from rankwall.checks.companion import fidelity
    from rankwall.checks.engine.statements import theorems

    directives = {label: directive for label, (directive, _, _) in theorems(DOCS).items()}
    for s in fidelity.STATEMENTS:
        html = (built / f"{s.page}.html").read_text()
        kind = directives[s.label].capitalize()  # "Theorem", "Lemma", "Corollary"
        assert re.search(
            rf'id="{s.label}"[^>]*>\s*<p class="admonition-title"><span class="caption-number">'
            rf"{kind} {re.escape(s.number)} ",
            html,
        ), (s.label, s.number)


def test_a_theorem_missing_from_the_index_fails_the_build(tmp_path):
    (tmp_path / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\n"
        'extensions = ["myst_parser", "sphinx_proof", "companion"]\n'
    )
    (tmp_path / "index.md").write_text("# Page\n\n```{prf:theorem} New\n:label: thm-unindexed\n\nText.\n```\n")
    result = sphinx(tmp_path, tmp_path / "out")
    assert result.returncode != 0
    assert "'thm-unindexed' (index) has no entry in fidelity.STATEMENTS" in result.stderr


def _table_body(html: str, css_class: str) -> str:
    """The body rows of the companion table of that class."""
    table = html[html.index(f'class="companion-table {css_class}') :]
    return table[table.index("<tbody>") : table.index("</table>")]


def test_the_fidelity_page_is_a_table_of_every_row_with_links(built):
    from rankwall.checks.companion import fidelity

    body = _table_body((built / "fidelity.html").read_text(), "fidelity-table")
    rows = re.findall(r'<tr class="row-(?:odd|even)" id="row-(\d+)">(.*?)</tr>', body, re.S)
    assert len(rows) == len(fidelity.ROWS) >= 50
    for (number, cells), row in zip(rows, fidelity.ROWS, strict=True):
        links = re.findall(r'<a class="reference internal" href="([^"]+)"', cells)
        assert f"{row.page}.html" in links, number
        for claim in row.claim_ids:
            assert f"statements.html#claim-{claim}" in links, (number, claim)
        if row.theorem:
            assert any(link.endswith(f"#{row.theorem}") for link in links), (number, row.theorem)
        assert row.status.value in cells


def _table_rows(html: str, css_class: str) -> list[str]:
    return re.findall(r"<tr class=\"row-(?:odd|even)\"[^>]*>(.*?)</tr>", _table_body(html, css_class), re.S)


def test_the_family_and_new_statement_lists_are_built_from_the_registry(built):
    """No page lists the families or the new statements by hand: a new family or theorem appears in
    the conjectures page's family table and on the beyond page by itself."""
    from rankwall.checks.claims import FAMILY_MODULES
    from rankwall.checks.companion import fidelity
    from rankwall.checks.engine.statements import Kind

    pattern = r"<td[^>]*>\s*(?:<p>)?<code[^>]*><span class=\"pre\">rankwall\.([a-z_]+)</span>"
    families = re.findall(pattern, (built / "conjectures.html").read_text())
    assert families == [module.__name__.rsplit(".", 1)[1] for module in FAMILY_MODULES]
    new = _table_rows((built / "beyond.html").read_text(), "statement-index")
    assert [re.search(r'href="[^"#]*#([^"]+)"', row).group(1) for row in new] == [
        s.label for s in fidelity.STATEMENTS if s.kind is Kind.NEW
    ]


def test_the_math_check_fails_on_raw_tex(tmp_path):
    """A math element with no mjx-container is counted as raw TeX; nothing is checked without a browser."""
    count = math_check._MathCount()
    count.feed('<span class="math">\\(x\\)</span><div class="math"><mjx-container>x</mjx-container></div>')
    assert (count.math, count.rendered, count.raw) == (2, 1, ["\\(x\\)"])
    assert math_check.main([str(tmp_path), "nope.html"]) == 2


@pytest.mark.skipif(math_check.find_chromium() is None, reason="no Chromium on PATH (apt-get install chromium)")
def test_two_pages_render_their_math_offline_in_chromium(built, tmp_path):
    for page in math_check.DEFAULT_PAGES:
        report = math_check.check_page(built / page, math_check.find_chromium())
        assert report.ok and report.math > 50, report
    # the same page loading MathJax from a CDN, which no host resolution reaches: every formula stays raw
    cdn = (
        (built / "error_rank.html")
        .read_text()
        .replace("_static/mathjax/tex-svg.js", "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-svg.js")
    )
    (tmp_path / "error_rank.html").write_text(cdn)
    report = math_check.check_page(tmp_path / "error_rank.html", math_check.find_chromium())
    assert report.rendered == 0 and len(report.raw) == report.math > 50


def test_readme_table_lists_every_claim():
    """The README's results table names exactly the registered claims."""
    from rankwall.checks.engine.verdict import CLAIM_ID, REGISTRY

    readme = (ROOT / "README.md").read_text()
    listed = set(re.findall(rf"^\| `({CLAIM_ID.pattern})` \|", readme, flags=re.MULTILINE))
    assert listed == {c.id for c in REGISTRY}


def test_the_rankwall_names_the_readme_gives_exist():
    """The README names family modules by example (their list is the docs' family table, built from
    the registry), so a new family edits no README sentence; each `rankwall.<name>` it gives is a
    family, a module, or the entry-point group."""
    from rankwall.checks.claims import FAMILY_MODULES
    from rankwall.checks.run.loader import ENTRY_POINT_GROUP

    families = {module.__name__.rsplit(".", 1)[1] for module in FAMILY_MODULES}
    named = set(re.findall(r"`(rankwall\.[a-z_]+)`", (ROOT / "README.md").read_text()))
    assert any(name.split(".")[1] in families for name in named)
    for name in named - {ENTRY_POINT_GROUP}:
        assert name.split(".")[1] in families or importlib.util.find_spec(name), name


def test_design_page_describes_the_packages_that_exist():
    design = (ROOT / "docs" / "design.md").read_text()
    for module in re.findall(r"`(checks/[a-z_/]+\.py|theory/[a-z_]+\.py)`", design):
        if "<family>" not in module:
            assert (ROOT / module).exists(), module


def test_the_readme_claims_table_is_what_the_main_job_gives():
    """The README's claims block is generated by scripts/readme_claims.py from `rankwall verify --json`:
    nothing in it is typed by hand, so a claim added, a status changed or a count moved fails here."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "readme_claims.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_the_conjectures_page_tables_are_generated():
    """The family and quantity tables of docs/conjectures.md are what scripts/docs_tables.py generates
    from the code now (the Markdown shows them without Sphinx; a stale table fails here)."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs_tables.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
