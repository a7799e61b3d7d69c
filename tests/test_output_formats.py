"""The output formats issue 23 added, ruff's as models: grouped, json-lines, pylint,
rdjson (reviewdog, validated against its schema) and azure (Azure Pipelines); and the
severity scale of the CI formats (SARIF, GitLab, JUnit) under --fail-level.

Each format has a snapshot of the real command's output on one small project, in
tests/snapshots/formats/. Regenerate them with OPTAX_LINT_UPDATE_SNAPSHOTS=1 (and read
the diff).
"""

from __future__ import annotations

import json
import os
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from test_cli import BAD, run

from optax_lint.commands.check import OUTPUT_FORMATS as CLI_FORMATS
from optax_lint.core.config import OUTPUT_FORMATS
from optax_lint.core.diagnostics import FileResult, Finding, Severity, Span
from optax_lint.reporters import FORMATS, ReportOptions, render

SNAPSHOTS = Path(__file__).parent / "snapshots" / "formats"
RDJSON_SCHEMA = Path(__file__).parent / "data" / "rdjson-DiagnosticResult.schema.json"
NEW_FORMATS = ["grouped", "json-lines", "pylint", "rdjson", "azure"]
WARNING_FILE = "import optax\n\ntx = optax.chain(optax.add_decayed_weights(1e-4), optax.adamw(1e-3))\n"
# The same warning after non-ASCII text: rdjson counts its columns in UTF-8 bytes.
UNICODE_FILE = 'import optax\n\nλ = "é"; tx = optax.chain(optax.add_decayed_weights(1e-4), optax.adamw(1e-3))\n'
INFO_FILE = textwrap.dedent(
    """\
    from flax.training import checkpoints

    def save(state, workdir, step):
        checkpoints.save_checkpoint(workdir, state, step)
    """
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "bad.py").write_text(BAD)  # OPX101 error, a safe fix
    (tmp_path / "warn.py").write_text(WARNING_FILE)  # OPX103 warning
    (tmp_path / "info.py").write_text(INFO_FILE)  # OPX505 info
    (tmp_path / "uni.py").write_text(UNICODE_FILE, encoding="utf-8")
    return tmp_path


def output(project: Path, fmt: str, *args: str) -> str:
    """The command's stdout for the project and a path that does not exist (OPX003)."""
    result = run([".", "missing.py", "--no-cache", "--output-format", fmt, *args], project)
    assert result.exit_code == 2, result.output  # the missing path is a usage error
    return result.stdout


def test_every_format_is_offered_by_the_cli_the_config_and_the_reporters() -> None:
    assert CLI_FORMATS == list(OUTPUT_FORMATS) == list(FORMATS)
    assert set(NEW_FORMATS) <= set(FORMATS)


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_snapshot(project: Path, fmt: str) -> None:
    text = output(project, fmt)
    snapshot = SNAPSHOTS / f"{fmt}.txt"
    if os.environ.get("OPTAX_LINT_UPDATE_SNAPSHOTS"):
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        snapshot.write_text(text, encoding="utf-8")
    assert text == snapshot.read_text(encoding="utf-8")


# --- json-lines ------------------------------------------------------------------------


def test_json_lines_holds_the_json_objects_one_per_line(project: Path) -> None:
    lines = output(project, "json-lines").splitlines()
    assert [json.loads(line) for line in lines] == json.loads(output(project, "json"))
    assert {json.loads(line)["code"] for line in lines} == {"OPX003", "OPX101", "OPX103", "OPX505"}


# --- rdjson ----------------------------------------------------------------------------


def test_rdjson_validates_against_reviewdogs_schema(project: Path) -> None:
    schema = json.loads(RDJSON_SCHEMA.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    result = json.loads(output(project, "rdjson"))
    jsonschema.Draft4Validator(schema).validate(result)
    assert result["source"]["name"] == "optax-lint"
    by_code = {(d["location"]["path"], d["code"]["value"]): d for d in result["diagnostics"]}
    assert {d["severity"] for d in result["diagnostics"]} == {"ERROR", "WARNING", "INFO"}
    clip = by_code[("bad.py", "OPX101")]
    assert clip["location"]["range"] == {"start": {"line": 5, "column": 5}, "end": {"line": 5, "column": 35}}
    assert clip["code"]["url"].endswith("docs/rules.md#clip-after-optimizer-opx101")
    # The safe fix is a suggestion: applied to the file, it is what --fix writes.
    [suggestion] = clip["suggestions"]
    lines = BAD.splitlines(keepends=True)

    def offset(position: dict) -> int:  # the file is ASCII: a byte column is a character column
        return sum(len(line) for line in lines[: position["line"] - 1]) + position["column"] - 1

    range_ = suggestion["range"]
    fixed = BAD[: offset(range_["start"])] + suggestion["text"] + BAD[offset(range_["end"]):]
    assert fixed.index("clip_by_global_norm") < fixed.index("adamw")
    assert by_code[("missing.py", "OPX003")]["location"]["range"]["start"] == {"line": 1, "column": 1}


def test_rdjson_columns_count_utf8_bytes(project: Path) -> None:
    result = json.loads(output(project, "rdjson"))
    [uni] = [d for d in result["diagnostics"] if d["location"]["path"] == "uni.py"]
    line = UNICODE_FILE.splitlines()[2]
    column = line.index("optax.add_decayed_weights")  # characters before the span
    assert uni["location"]["range"]["start"] == {"line": 3, "column": len(line[:column].encode()) + 1}
    assert uni["location"]["range"]["start"]["column"] == column + 1 + 2  # λ and é: two bytes each, one character each


# --- azure, pylint, grouped ------------------------------------------------------------


def test_azure_escapes_what_would_end_the_command_early() -> None:
    hostile = Finding("OPX003", "io-error", Severity.INFO, "100% [x];\r\nnext", "a;b].py", Span(2, 3, 2, 4))
    text = render([FileResult("a;b].py", [hostile])], "azure", sources={}, options=ReportOptions())
    assert text == "##vso[task.logissue type=warning;sourcepath=a%3Bb%5D.py;linenumber=2;columnnumber=3;code=OPX003;]100%AZP25 [x];%0D%0Anext\n"


def test_pylint_and_grouped_keep_one_finding_per_line(project: Path) -> None:
    pylint = output(project, "pylint").splitlines()
    assert "bad.py:5: [OPX101] clip_by_global_norm(1.0) runs after adamw(learning_rate=3e-4) in this chain: it clips the updates, not the gradients" in pylint
    assert len(pylint) == 5
    grouped = output(project, "grouped")
    assert "bad.py:\n  5:5 OPX101 error [*] clip_by_global_norm(1.0)" in grouped
    assert grouped.endswith("Found 5 problems (1 fixable with --fix).\n1 info finding does not fail the run (--fail-level warning).\n")


def test_grouped_aligns_positions_within_a_file() -> None:
    findings = [
        Finding("OPX101", "clip-after-optimizer", Severity.ERROR, "first", "t.py", Span(3, 5, 3, 6)),
        Finding("OPX103", "double-weight-decay", Severity.WARNING, "second", "t.py", Span(12, 17, 12, 20)),
    ]
    text = render([FileResult("t.py", findings)], "grouped", sources={}, options=ReportOptions(quiet=True))
    assert text == "t.py:\n   3:5  OPX101 error first\n  12:17 OPX103 warning second\n\n"


# --- severities and --fail-level in the CI formats ---------------------------------------


def test_sarif_and_gitlab_levels_follow_severity(project: Path) -> None:
    sarif = json.loads(output(project, "sarif"))
    levels = {r["ruleId"]: r["level"] for r in sarif["runs"][0]["results"]}
    assert (levels["OPX101"], levels["OPX103"], levels["OPX505"]) == ("error", "warning", "note")
    gitlab = {i["check_name"]: i["severity"] for i in json.loads(output(project, "gitlab"))}
    assert (gitlab["OPX101"], gitlab["OPX103"], gitlab["OPX505"]) == ("critical", "major", "minor")


@pytest.mark.parametrize(
    ("fail_level", "failing"),
    [("warning", {"OPX003", "OPX101", "OPX103"}), ("error", {"OPX003", "OPX101"}), ("info", {"OPX003", "OPX101", "OPX103", "OPX505"})],
)
def test_junit_failures_are_what_fails_the_run(project: Path, fail_level: str, failing: set) -> None:
    root = ET.fromstring(output(project, "junit", "--fail-level", fail_level))
    cases = root.findall("testsuite/testcase")
    assert int(root.get("tests")) == len(cases) == 5
    failed = {c.find("failure").get("type") for c in cases if c.find("failure") is not None}
    assert failed == failing
    assert int(root.get("failures")) == sum(int(s.get("failures")) for s in root.findall("testsuite")) == len(cases) - len(
        [c for c in cases if c.find("failure") is None]
    )
    # What does not fail the run passes, its finding kept in the case's output.
    for case in cases:
        if case.find("failure") is None:
            assert case.find("system-out").text.startswith(case.get("classname") + ":")
