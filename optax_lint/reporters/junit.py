"""The junit format: JUnit XML, for CI systems that show test reports.

One testsuite per file with findings, one testcase per finding (ruff's layout); a run
without findings is one passing testcase, so the report is never empty.

A finding fails its testcase only when it fails the run (at or above --fail-level,
default warning). One below it (info advice, by default) is a passing testcase whose
<system-out> holds the finding: GitLab's test report, Jenkins and Azure Pipelines show
a case's output beside it, so the advice is read but nothing is red. A <skipped> case
would say the check did not run, and some pipelines treat skipped tests as a problem.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from typing import TYPE_CHECKING, Mapping

from optax_lint.core.diagnostics import Finding

if TYPE_CHECKING:
    from optax_lint.reporters.options import ReportOptions

# Characters XML 1.0 cannot carry even escaped; a hostile file name or message must not
# make the whole report unparseable.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _element(parent: ET.Element, tag: str, **attrs: object) -> ET.Element:
    return ET.SubElement(parent, tag, {k: _clean(str(v)) for k, v in attrs.items()})


def render(findings: list[Finding], sources: Mapping[str, str], options: ReportOptions) -> str:
    from optax_lint.core.config import (  # late: config loads the catalogue
        DEFAULT_FAIL_LEVEL,
        severity_fails,
    )

    level = options.fail_level or DEFAULT_FAIL_LEVEL
    by_file: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        by_file[finding.path].append(finding)
    failing = sum(1 for f in findings if severity_fails(f.severity, level))
    root = ET.Element("testsuites", {"name": "optax-lint", "tests": str(max(len(findings), 1)), "failures": str(failing), "errors": "0"})
    if not findings:
        suite = _element(root, "testsuite", name="optax-lint", tests=1, failures=0, errors=0)
        _element(suite, "testcase", name="no findings", classname="optax-lint")
    for path, items in by_file.items():
        fails = [severity_fails(f.severity, level) for f in items]
        suite = _element(root, "testsuite", name=path, tests=len(items), failures=sum(fails), errors=0)
        for f, fails_run in zip(items, fails):
            s = f.span
            # In a notebook, the line counts within the cell: `line` is the .ipynb's first.
            line = s.line if f.cell is None else 1
            case = _element(suite, "testcase", name=f"{f.code} ({f.name})", classname=path, file=path, line=line,
                            column=s.column if f.cell is None else 1)
            text = _clean(f"{f.location}: {f.code} [{f.severity.value}] {f.message}")
            if fails_run:
                _element(case, "failure", message=f.message, type=f.code).text = text
            else:
                ET.SubElement(case, "system-out").text = text
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
