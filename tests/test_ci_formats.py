"""The CI output formats: sarif (validated against the official SARIF 2.1.0 schema),
gitlab (Code Quality, fingerprints stable across line shifts) and junit (XML)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from test_cli import BAD, GOOD, UNSAFE_ONLY, run

from optax_lint.core.catalogue import load_catalogue
from optax_lint.core.config import OUTPUT_FORMATS
from optax_lint.core.diagnostics import FileResult, Finding, Severity, Span
from optax_lint.reporters import FORMATS, ReportOptions, render

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "examples" / "train_transformer.py", tmp_path / "train.py")
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "unsafe.py").write_text(UNSAFE_ONLY)
    (tmp_path / "broken.py").write_text("import optax\ntx = optax.chain(\n")
    # an info finding, which does not fail the run
    (tmp_path / "legacy.py").write_text("from flax.training import checkpoints\n\ncheckpoints.save_checkpoint('/tmp/ckpt', {'w': 1}, step=0)\n")
    (tmp_path / "dir with space").mkdir()
    (tmp_path / "dir with space" / "bad.py").write_text(BAD)
    return tmp_path


def output(project: Path, fmt: str, *args: str) -> str:
    result = run(["--output-format", fmt, *args], project)
    assert result.exit_code == 1, result.output
    return result.output


def validator() -> jsonschema.Draft4Validator:
    raw = SCHEMA.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SCHEMA_SHA256  # the official text, unedited
    schema = json.loads(raw)
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def test_formats_are_registered_everywhere() -> None:
    assert set(FORMATS) == set(OUTPUT_FORMATS)
    assert {"sarif", "gitlab", "junit"} <= set(FORMATS)


# --- sarif --------------------------------------------------------------------


def test_sarif_validates_against_the_official_schema(project: Path) -> None:
    log = json.loads(output(project, "sarif"))
    check = validator()
    errors = sorted(check.iter_errors(log), key=str)
    assert errors == []
    run_ = log["runs"][0]
    codes = {r["ruleId"] for r in run_["results"]}
    assert {"OPX001", "OPX101", "OPX102", "OPX105", "OPX302"} <= codes
    assert any("fixes" in r for r in run_["results"]) and any("relatedLocations" in r for r in run_["results"])
    rules = run_["tool"]["driver"]["rules"]
    assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in run_["results"])
    # The validator is not vacuous: the same log with a broken region or no version fails.
    broken = json.loads(json.dumps(log))
    broken["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert list(check.iter_errors(broken))
    del broken["version"]
    assert not check.is_valid(broken)


def test_sarif_rule_metadata(project: Path) -> None:
    driver = json.loads(output(project, "sarif"))["runs"][0]["tool"]["driver"]
    catalogue = load_catalogue()
    assert [r["id"] for r in driver["rules"]] == list(catalogue)
    headings = set()
    for line in (ROOT / "docs" / "rules.md").read_text().splitlines():
        if line.startswith("## "):  # GitHub's anchor for the heading
            headings.add(re.sub(r"[^\w\- ]", "", line[3:].strip().lower()).replace(" ", "-"))
    for rule in driver["rules"]:
        spec = catalogue[rule["id"]]
        assert rule["shortDescription"]["text"] == spec.summary
        assert rule["help"]["text"] == spec.render_doc()
        markdown = rule["help"]["markdown"]
        assert markdown.startswith(f"# {spec.name} ({spec.code})\n\nSeverity: {spec.severity.value}  \nFix: ")
        assert markdown.replace("  \n", "\n").split("## What it does")[1] == spec.render_doc().split("## What it does")[1]
        if spec.protocol:
            assert f"({uri_base(rule)}/docs/protocol.md#{spec.protocol})" in markdown
        assert rule["fullDescription"]["text"].split()[:4] == spec.doc["what_it_does"].split()[:4]
        uri, anchor = rule["helpUri"].split("#")
        assert uri.startswith("https://") and uri.endswith("/docs/rules.md")
        assert anchor in headings, rule["id"]
        assert rule["defaultConfiguration"]["level"] == {"error": "error", "warning": "warning", "info": "note"}[spec.severity.value]


def uri_base(rule: dict) -> str:
    return rule["helpUri"].split("/docs/rules.md")[0]


def _offset(text: str, line: int, column: int) -> int:
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    return starts[line - 1] + column - 1


def test_sarif_regions_and_fix_replacements_match_the_fixer(project: Path) -> None:
    log = json.loads(output(project, "sarif", "bad.py", "unsafe.py", "dir with space/bad.py"))
    spans = {
        (f["path"], f["code"]): (f["line"], f["column"], f["end_line"], f["end_column"])
        for f in json.loads(run(["--output-format", "json", "bad.py", "unsafe.py", "dir with space/bad.py"], project).output)
    }
    results = log["runs"][0]["results"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert uris == {"bad.py", "unsafe.py", "dir%20with%20space/bad.py"}
    for res in results:
        loc = res["locations"][0]["physicalLocation"]
        path = loc["artifactLocation"]["uri"].replace("%20", " ")
        region = loc["region"]
        assert spans[(path, res["ruleId"])] == (region["startLine"], region["startColumn"], region["endLine"], region["endColumn"])
    # Applying each fix's replacements gives exactly what --fix (--unsafe-fixes) writes.
    for name, flags in (("bad.py", ["--fix"]), ("unsafe.py", ["--fix", "--unsafe-fixes"])):
        original = (project / name).read_text()
        (fix,) = [r["fixes"][0] for r in results if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == name]
        text = original
        for rep in sorted(fix["artifactChanges"][0]["replacements"], key=lambda r: -_offset(original, r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"])):
            d = rep["deletedRegion"]
            start, end = _offset(text, d["startLine"], d["startColumn"]), _offset(text, d["endLine"], d["endColumn"])
            text = text[:start] + rep["insertedContent"]["text"] + text[end:]
        run([*flags, name], project)
        assert text == (project / name).read_text() != original
        assert fix["properties"]["applicability"] == ("safe" if name == "bad.py" else "unsafe")


# --- gitlab -------------------------------------------------------------------


def test_gitlab_code_quality_report(project: Path) -> None:
    issues = json.loads(output(project, "gitlab"))
    assert issues and len({i["fingerprint"] for i in issues}) == len(issues)
    for issue in issues:
        assert set(issue) >= {"description", "check_name", "fingerprint", "severity", "location"}
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert re.fullmatch(r"[0-9a-f]{64}", issue["fingerprint"])
        assert issue["location"]["positions"]["begin"]["line"] >= 1
        assert not issue["location"]["path"].startswith(("/", "./"))
    assert {i["location"]["path"] for i in issues} >= {"train.py", "bad.py", "dir with space/bad.py"}


def test_gitlab_fingerprints_survive_a_line_shift_and_see_new_findings(project: Path) -> None:
    def prints() -> dict[str, int]:
        issues = json.loads(output(project, "gitlab", "train.py"))
        return {i["fingerprint"]: i["location"]["positions"]["begin"]["line"] for i in issues}

    before = prints()
    text = (project / "train.py").read_text()
    (project / "train.py").write_text("# a comment\n\n\nimport os\n" + text)
    after = prints()
    assert set(after) == set(before)
    assert all(after[fp] == before[fp] + 4 for fp in before)
    # The same mistake written again, twice on identical lines: new issues (told apart
    # by their occurrence), while the old ones keep their fingerprints.
    line = "tx2 = optax.chain(optax.adamw(1e-3), optax.clip_by_global_norm(1.0))\n"
    (project / "train.py").write_text(text + "\n" + line + line)
    grown = prints()
    assert set(before) < set(grown)
    new_lines = sorted(grown[fp] for fp in set(grown) - set(before))
    end = len(text.splitlines())
    assert new_lines and new_lines == sorted([end + 2] * (len(new_lines) // 2) + [end + 3] * (len(new_lines) // 2))


# --- junit --------------------------------------------------------------------


def test_junit_xml(project: Path) -> None:
    root = ET.fromstring(output(project, "junit"))
    json_findings = json.loads(run(["--output-format", "json"], project).output)
    assert root.tag == "testsuites"
    # Info findings do not fail the run (--fail-level warning): they are no failures (issue 23).
    failing = [f for f in json_findings if f["severity"] != "info"]
    assert len(failing) < len(json_findings)
    assert int(root.get("tests")) == len(json_findings)
    assert int(root.get("failures")) == len(failing)
    cases = root.findall("testsuite/testcase")
    assert len(cases) == len(json_findings)
    assert len([c for c in cases if c.find("failure") is not None]) == len(failing)
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {f["path"] for f in json_findings}
    case = next(c for c in suites["bad.py"].findall("testcase"))
    assert case.get("name") == "OPX101 (clip-after-optimizer)" and case.get("line") == "5"
    assert case.find("failure").get("type") == "OPX101"


def test_junit_clean_run_and_hostile_text() -> None:
    clean = ET.fromstring(render([], "junit", sources={}, options=ReportOptions()))
    assert (clean.get("tests"), clean.get("failures")) == ("1", "0")
    assert clean.find("testsuite/testcase").find("failure") is None
    hostile = Finding("OPX003", "io-error", Severity.ERROR, "bad \x1b[31m\x00 <name> & \"q\"", "a\x07b.py", Span(1, 1, 1, 2))
    text = render([FileResult("a\x07b.py", [hostile])], "junit", sources={}, options=ReportOptions())
    failure = ET.fromstring(text).find("testsuite/testcase/failure")
    assert failure.get("message") == 'bad \\u001b[31m\\u0000 <name> & "q"'
    assert ET.fromstring(text).find("testsuite").get("name") == "a\\u0007b.py"


# --- the README's snippets, run as written ----------------------------------------------


def test_readme_ci_snippets_run_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Pull requests, code scanning, baselines and stdin")[1].split("\n## ")[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 4
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "optax-lint"  # the installed command, as a user has it
    shim.write_text(f'#!/bin/sh\n"{sys.executable}" -m optax_lint "$@"\necho "$?" >> "{tmp_path}/codes"\n')
    shim.chmod(0o755)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text(BAD)
    git = ["git", "-c", "user.email=a@b.c", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"], ["update-ref", "refs/remotes/origin/main", "HEAD"]):
        subprocess.run([*git, *args], cwd=repo, check=True, timeout=60)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    for block in blocks:
        proc = subprocess.run(["bash", "-c", block], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        assert "error" not in proc.stderr.lower(), (block, proc.stderr)
    codes = (tmp_path / "codes").read_text().split()
    assert len(codes) == 8 and "2" not in codes, codes  # every optax-lint line ran, none a usage error
    assert validator().is_valid(json.loads((repo / "optax-lint.sarif").read_text()))
    assert json.loads((repo / "gl-code-quality-report.json").read_text())[0]["check_name"] == "OPX101"
    assert ET.fromstring((repo / "optax-lint-junit.xml").read_text()).get("failures") == "1"
    assert json.loads((repo / "optax-lint-baseline.json").read_text())["findings"][0]["code"] == "OPX101"
    assert (repo / "fixed.py").read_text() == GOOD


def test_doc_links_point_where_pyproject_says_the_project_lives() -> None:
    """SARIF's helpUri and the editor's hover link share one base, the project's URL."""
    import tomllib

    from optax_lint import lsp
    from optax_lint.core.catalogue import HOMEPAGE, RULES_DOC_URL, load_catalogue
    from optax_lint.reporters.sarif import help_uri

    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Homepage"] == HOMEPAGE and urls["Documentation"] == RULES_DOC_URL
    spec = load_catalogue()["OPX108"]
    assert help_uri(spec) == lsp.rule_url("OPX108") == f"{RULES_DOC_URL}#decay-without-mask-opx108"


# --- notebooks in the CI formats ---------------------------------------------------


def _notebook_project(tmp_path: Path, first_cell: str) -> Path:
    from test_notebook import notebook

    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "train.ipynb").write_text(notebook([first_cell, "tx = optax.chain(optax.adam(1e-3), optax.clip_by_global_norm(1.0))\n"]))
    return tmp_path


def test_notebook_findings_name_the_cell_not_a_json_line(tmp_path: Path) -> None:
    project = _notebook_project(tmp_path, "import optax\n")
    log = json.loads(output(project, "sarif", "--no-cache"))
    assert sorted(validator().iter_errors(log), key=str) == []
    [res] = log["runs"][0]["results"]
    [location] = res["locations"]
    assert "region" not in location["physicalLocation"]  # cell lines are not lines of the .ipynb
    assert location["properties"] == {"cell": 2, "cellLine": 1, "cellColumn": 36}
    assert res["message"]["text"].startswith("cell 2, line 1: clip_by_global_norm(1.0) runs after adam(1e-3)")
    assert "fixes" not in res  # the fix edits cell text, not the JSON file
    [issue] = json.loads(output(project, "gitlab", "--no-cache"))
    assert issue["location"]["positions"]["begin"] == {"line": 1, "column": 1}
    assert issue["description"].startswith("OPX101 (clip-after-optimizer): cell 2, line 1: ")
    case = ET.fromstring(output(project, "junit", "--no-cache")).find(".//testcase")
    assert case.get("line") == "1" and case.find("failure").text.startswith("train.ipynb:cell 2:1:36: OPX101 [error]")


def test_notebook_fingerprint_is_keyed_on_the_cell_line(tmp_path: Path) -> None:
    """The fingerprint reads the finding's line from its cell, so lines added to an
    earlier cell leave it unchanged (as the baseline needs)."""
    before = json.loads(output(_notebook_project(tmp_path / "a", "import optax\n"), "sarif", "--no-cache"))
    after = json.loads(output(_notebook_project(tmp_path / "b", "import optax\nimport jax\n\nSEED = 0\n"), "sarif", "--no-cache"))
    [one], [two] = before["runs"][0]["results"], after["runs"][0]["results"]
    assert one["partialFingerprints"] == two["partialFingerprints"]
    from optax_lint.core.fingerprints import finding_keys

    finding = Finding("OPX101", "clip-after-optimizer", Severity.ERROR, "m", "t.ipynb", Span(1, 45, 1, 70), cell=2)
    [(_, key)] = finding_keys([finding], {"t.ipynb": "{\n  \"cells\": []\n}\n", "t.ipynb:cell 2": "tx = optax.chain(a, b)\n"})
    assert key.snippet == "tx = optax.chain(a, b)"
