"""The sarif format: a SARIF 2.1.0 log for GitHub code scanning and other SARIF viewers.

One run; the driver lists every rule of the catalogue (summary, full doc as text and
markdown, a link to its section of docs/rules.md, default level); each result carries
its region, related locations, a line-shift-proof fingerprint, and its fix as SARIF
`fixes` when the fix's text edits are known (they are computed for this format).
Columns are counted in characters, which SARIF calls unicodeCodePoints.
"""

from __future__ import annotations

import json as _json
import os
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Mapping, Optional
from urllib.parse import quote

from optax_lint import __version__
from optax_lint.core.catalogue import HOMEPAGE, RuleSpec, load_catalogue, rule_doc_url
from optax_lint.core.diagnostics import Finding, Severity, Span
from optax_lint.core.fingerprints import finding_keys

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT_NAME = "optaxLint/v1"  # bump the suffix if the key ever changes meaning
SRCROOT = "%SRCROOT%"

LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def help_uri(spec: RuleSpec) -> str:
    return rule_doc_url(spec)


def help_markdown(spec: RuleSpec) -> str:
    """The rule doc as markdown: the metadata lines kept apart (hard line breaks) and
    the protocol reference a link a code-scanning page can follow."""
    doc = spec.render_doc()
    if spec.protocol:
        doc = doc.replace(f"Protocol: {spec.protocol_url}", f"Protocol: [{spec.protocol_url}]({HOMEPAGE}/blob/main/{spec.protocol_url})", 1)
    head, _, body = doc.partition("\n\n")
    meta, _, rest = body.partition("\n\n")
    hard_breaks = meta.replace("\n", "  \n")
    return f"{head}\n\n{hard_breaks}\n\n{rest}"


def rule_descriptor(spec: RuleSpec) -> dict:
    doc = spec.render_doc()
    return {
        "id": spec.code,
        "name": spec.name,
        "shortDescription": {"text": spec.summary},
        "fullDescription": {"text": " ".join(spec.doc.get("what_it_does", spec.summary).split())},
        "help": {"text": doc, "markdown": help_markdown(spec)},
        "helpUri": help_uri(spec),
        "defaultConfiguration": {"level": LEVEL[spec.severity], "enabled": spec.default_enabled},
        "properties": {"tags": [t for t in ("optax-lint", spec.family) if t], "fix": spec.fix.value if spec.fix else "none"},
    }


def artifact_location(path: str) -> dict:
    """Relative paths stay relative to the source root (the working directory), as code
    scanning expects; absolute ones become file: URIs."""
    if os.path.isabs(path):
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(PurePosixPath(*Path(path).parts).as_posix()), "uriBaseId": SRCROOT}


def region(span: Span) -> dict:
    return {
        "startLine": span.line,
        "startColumn": span.column,
        "endLine": max(span.end_line, span.line),
        "endColumn": max(span.end_column, 1),
    }


def fixes(finding: Finding) -> list[dict]:
    fix = finding.fix
    if fix is None or not fix.edits or finding.cell is not None:  # cell edits are not edits of the .ipynb text
        return []
    replacements = [
        {"deletedRegion": region(edit.span), "insertedContent": {"text": edit.content}} for edit in fix.edits
    ]
    return [
        {
            "description": {"text": fix.title or f"Fix {finding.code}"},
            "artifactChanges": [{"artifactLocation": artifact_location(finding.path), "replacements": replacements}],
            "properties": {"applicability": fix.applicability.value},
        }
    ]


def physical_location(path: str, span: Span, cell: Optional[int]) -> dict:
    """A file and region; in a notebook (lines counted within a cell, not the .ipynb's
    JSON) the file alone, with the cell and line as properties."""
    if cell is None:
        return {"physicalLocation": {"artifactLocation": artifact_location(path), "region": region(span)}}
    return {
        "physicalLocation": {"artifactLocation": artifact_location(path)},
        "properties": {"cell": cell, "cellLine": span.line, "cellColumn": span.column},
    }


def result(finding: Finding, rule_index: Optional[int], fingerprint: str) -> dict:
    location = physical_location(finding.path, finding.span, finding.cell)
    out = {
        "ruleId": finding.code,
        "level": LEVEL[finding.severity],
        "message": {"text": finding.cell_note + finding.message},
        "locations": [location],
        "partialFingerprints": {FINGERPRINT_NAME: fingerprint},
    }
    if finding.related:
        out["relatedLocations"] = [
            {
                "id": n,
                "message": {"text": rel.message},
                **physical_location(rel.path or finding.path, rel.span, rel.cell),
            }
            for n, rel in enumerate(finding.related, start=1)
        ]
    if rule_index is not None:  # a code outside the catalogue still reports, unindexed
        out["ruleIndex"] = rule_index
    found_fixes = fixes(finding)
    if found_fixes:
        out["fixes"] = found_fixes
    return out


def sarif_log(findings: list[Finding], sources: Mapping[str, str]) -> dict:
    catalogue = load_catalogue()
    index = {code: n for n, code in enumerate(catalogue)}
    results = [result(f, index.get(f.code), key.digest()) for f, key in finding_keys(findings, sources)]
    run = {
        "tool": {
            "driver": {
                "name": "optax-lint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": HOMEPAGE,
                "rules": [rule_descriptor(spec) for spec in catalogue.values()],
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": Path.cwd().as_uri().rstrip("/") + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    return _json.dumps(sarif_log(findings, sources), indent=2, ensure_ascii=False) + "\n"
