"""Sphinx hooks of the proof companion, all built from ``rankwall.checks.companion.fidelity``:

- stable theorem numbers: each statement's number (``SJ.3``) is data in ``STATEMENTS``, written
  over the build-order numbers that sphinx-proof would give, so a number never changes when a page
  or a theorem is added elsewhere; a theorem without an entry is a build warning (an error under
  ``-W``);
- ``{statement-index}`` (``:kind: new`` keeps one kind) and ``{claim-index}``: the statement index
  (label, number, seed reference, kind, claims, tests) and every registry claim with the statements
  it checks;
- ``{fidelity-table}``: the fidelity rows as an HTML table, every figure read from the evidence
  when the page is built, each row linking to its theorem, claims and page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from rankwall.checks.companion import fidelity

logger = logging.getLogger(__name__)

#: the anchor of a claim in the claim index
CLAIM_ANCHOR = "claim-{}"
CLAIM_PAGE = "statements"


def assign_stable_numbers(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Overwrite the build-order numbers that Sphinx has just assigned (``env-get-updated``, after
    the toctree collector) with the statement index's; the pages that carry them are rewritten."""
    proofs: dict[str, dict[str, Any]] = getattr(env, "proof_list", {})
    indexed = {s.label: s for s in fidelity.STATEMENTS}
    pages: set[str] = set()
    for label, entry in proofs.items():
        if entry["nonumber"]:
            continue
        statement = indexed.get(label)
        if statement is None:
            logger.warning(f"theorem {label!r} ({entry['docname']}) has no entry in fidelity.STATEMENTS")
            continue
        if statement.page != entry["docname"]:
            logger.warning(f"theorem {label!r} is on {entry['docname']}, the index says {statement.page}")
            continue
        numbers = env.toc_fignumbers.setdefault(entry["docname"], {}).setdefault(entry["countertype"], {})
        numbers[label] = tuple(statement.number.split("."))
        pages.add(entry["docname"])
    for label, statement in indexed.items():
        if label not in proofs:
            logger.warning(f"fidelity.STATEMENTS names {label!r} ({statement.number}), which no page defines")
    return sorted(pages)


def _text(text: str) -> nodes.paragraph:
    return nodes.paragraph(text=text)


def _theorem_ref(label: str, docname: str) -> addnodes.pending_xref:
    """A link to a theorem, shown as its stable name ("Theorem SJ.3")."""
    return addnodes.pending_xref(
        "",
        nodes.inline(label, label),
        refdomain="prf",
        reftype="ref",
        reftarget=label,
        refdoc=docname,
        refexplicit=False,
        refwarn=True,
    )


def _doc_ref(page: str, docname: str) -> addnodes.pending_xref:
    return addnodes.pending_xref(
        "",
        nodes.inline(page, page),
        refdomain="std",
        reftype="doc",
        reftarget=f"/{page}",
        refdoc=docname,
        refexplicit=True,
        refwarn=True,
    )


def _claim_ref(claim_id: str, docname: str) -> addnodes.pending_xref:
    return addnodes.pending_xref(
        "",
        nodes.literal(claim_id, claim_id),
        refdomain="std",
        reftype="ref",
        reftarget=CLAIM_ANCHOR.format(claim_id),
        refdoc=docname,
        refexplicit=True,
        refwarn=True,
    )


def _joined(items: list[nodes.Node], separator: str = ", ") -> nodes.paragraph:
    paragraph = nodes.paragraph()
    for i, item in enumerate(items):
        if i:
            paragraph += nodes.Text(separator)
        paragraph += item
    return paragraph


def _table(
    headers: tuple[str, ...],
    rows: list[tuple[list[nodes.Node] | nodes.Node, ...]],
    widths: tuple[int, ...],
    classes: tuple[str, ...] = (),
    row_ids: list[str] | None = None,
) -> nodes.table:
    table = nodes.table(classes=["companion-table", *classes])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    header_row = nodes.row()
    for header in headers:
        header_row += nodes.entry("", _text(header))
    head += header_row
    body = nodes.tbody()
    group += body
    for i, cells in enumerate(rows):
        row = nodes.row(ids=[row_ids[i]] if row_ids else [])
        for cell in cells:
            entry = nodes.entry()
            entry += cell if isinstance(cell, nodes.Node) else _text(str(cell))
            row += entry
        body += row
    return table


class StatementIndex(SphinxDirective):
    """Every theorem (or those of one ``:kind:``): stable number, link, where the seeds state it,
    kind, claims and tests."""

    option_spec: ClassVar[dict[str, Any]] = {"kind": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        doc = self.env.docname
        only = self.options.get("kind")
        rows = []
        for s in fidelity.STATEMENTS:
            if only is not None and s.kind.value != only:
                continue
            claims = [_claim_ref(c, doc) for c in s.claims] or [nodes.Text("none (proof only)")]
            tests = [nodes.literal(t, t) for t in s.tests]
            kind = nodes.paragraph(text=s.kind.value + (f": {s.note}" if s.note else ""))
            rows.append(
                (_joined([_theorem_ref(s.label, doc)]), _text(s.seed), kind, _joined(claims), _joined(tests, "; "))
            )
        return [
            _table(
                ("statement", "in the seeds", "kind", "claims", "tests"),
                rows,
                (12, 22, 26, 20, 20),
                ("statement-index",),
            )
        ]


class ClaimIndex(SphinxDirective):
    """Every registry claim, anchored, with the statements that it checks."""

    def run(self) -> list[nodes.Node]:
        import rankwall.checks.claims  # noqa: F401  (fills the registry)
        from rankwall.checks.engine.verdict import REGISTRY

        doc = self.env.docname
        std = self.env.get_domain("std")
        rows, ids = [], []
        for claim in sorted(REGISTRY, key=lambda c: c.id):
            anchor = CLAIM_ANCHOR.format(claim.id)
            std.note_hyperlink_target(anchor, doc, anchor, claim.id)
            checked = [_theorem_ref(s.label, doc) for s in fidelity.STATEMENTS if claim.id in s.claims]
            mutants = ", ".join(claim.mutants) or "none"
            rows.append(
                (
                    nodes.literal(claim.id, claim.id),
                    _text(claim.statement),
                    _joined(checked) if checked else _text("none"),
                    _text(mutants),
                )
            )
            ids.append(anchor)
        return [_table(("claim", "statement", "checks", "mutants"), rows, (18, 52, 15, 15), ("claim-index",), ids)]


class FidelityTable(SphinxDirective):
    """The fidelity rows as a table; every rankwall figure is read from the evidence now."""

    def run(self) -> list[nodes.Node]:
        doc = self.env.docname
        docs = Path(self.env.srcdir)
        rows, ids = [], []
        for i, row in enumerate(fidelity.ROWS, 1):
            links: list[nodes.Node] = []
            if row.theorem:
                links.append(_theorem_ref(row.theorem, doc))
            links += [_claim_ref(c, doc) for c in row.claim_ids]
            links.append(_doc_ref(row.page, doc))
            evidence = nodes.container()
            evidence += _joined(links)
            evidence += nodes.paragraph("", "", nodes.literal(row.command, row.command))
            status = nodes.paragraph("", "", nodes.strong(row.status.value, row.status.value))
            rows.append(
                (
                    _text(str(i)),
                    _text(f"seed {row.seed}, {row.where}"),
                    _text(row.seed_says),
                    status,
                    _text(row.figure(docs)),
                    _text(row.reason or "—"),
                    evidence,
                )
            )
            ids.append(f"row-{i}")
        headers = ("#", "where", "the seed says", "status", "rankwall's figure", "why", "evidence")
        return [_table(headers, rows, (3, 9, 18, 10, 23, 18, 19), ("fidelity-table",), ids)]


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("env-get-updated", assign_stable_numbers, priority=900)  # after the toctree collector
    app.add_directive("statement-index", StatementIndex)
    app.add_directive("claim-index", ClaimIndex)
    app.add_directive("fidelity-table", FidelityTable)
    return {"version": "1", "parallel_read_safe": False, "parallel_write_safe": True, "env_version": 1}
