"""action.yml, the composite GitHub Action: valid YAML, and its shell steps, executed
here as the runner would (inputs and step outputs substituted, GITHUB_ACTION_PATH and
GITHUB_OUTPUT set), install optax-lint from the checkout, annotate, and write SARIF."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_ci_formats import validator
from test_cli import BAD, GOOD

# Its module fixtures are costly: one xdist worker computes them once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("action")

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
EXPR = re.compile(r"\$\{\{\s*(inputs\.[\w-]+|steps\.[\w-]+\.outputs\.[\w-]+)\s*\}\}")


def steps() -> dict[str, dict]:
    return {step["id"]: step for step in ACTION["runs"]["steps"]}


def evaluate(text: str, inputs: dict[str, str], outputs: dict[str, dict[str, str]]) -> str:
    def value(match: re.Match) -> str:
        parts = match.group(1).split(".")
        if parts[0] == "inputs":
            return inputs.get(parts[1], ACTION["inputs"][parts[1]].get("default", ""))
        return outputs[parts[1]][parts[3]]

    return EXPR.sub(value, text)


def run_step(step_id: str, inputs: dict, outputs: dict, workdir: Path, scratch: Path) -> subprocess.CompletedProcess:
    step = steps()[step_id]
    output_file = scratch / f"{step_id}.output"
    output_file.write_text("")
    script = scratch / f"{step_id}.sh"
    script.write_text(step["run"])
    env = {
        **os.environ,
        "GITHUB_ACTION_PATH": str(ROOT),
        "GITHUB_OUTPUT": str(output_file),
        "RUNNER_TEMP": str(scratch),
        "PIP_NO_INPUT": "1",
    }
    env.update({k: evaluate(str(v), inputs, outputs) for k, v in step.get("env", {}).items()})
    # What GitHub runs for `shell: bash`.
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=600,
    )
    outputs[step_id] = dict(line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line)
    return proc


def test_action_yml_is_a_composite_action() -> None:
    assert ACTION["runs"]["using"] == "composite"
    assert set(ACTION["inputs"]) >= {"paths", "args", "sarif-file", "python"}
    assert "version" not in ACTION["inputs"]  # optax-lint is not on PyPI: the `uses:` ref is the version
    assert list(steps()) == ["install", "lint"]
    for step in ACTION["runs"]["steps"]:
        assert step["shell"] == "bash"
        # Inputs reach scripts only through env: no expression inside the script text.
        assert "${{" not in step["run"]
    assert 'pip install --quiet --disable-pip-version-check "$GITHUB_ACTION_PATH"' in steps()["install"]["run"]
    assert "--output-format github" in steps()["lint"]["run"]
    assert "--output-format sarif" in steps()["lint"]["run"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[dict, Path]:
    scratch = tmp_path_factory.mktemp("runner")
    outputs: dict = {}
    proc = run_step("install", {"python": sys.executable}, outputs, scratch, scratch)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert Path(outputs["install"]["bin"]).is_file()
    return outputs, scratch


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BAD)
    (tmp_path / "src" / "clean.py").write_text(GOOD)
    return tmp_path


def test_steps_annotate_and_write_sarif(installed, repo: Path) -> None:
    outputs, scratch = installed
    outputs = dict(outputs)
    proc = run_step("lint", {"sarif-file": "optax-lint.sarif"}, outputs, repo, scratch)
    assert proc.returncode == 1, proc.stderr
    annotations = [line for line in proc.stdout.splitlines() if line.startswith("::")]
    assert annotations == [
        "::error file=src/train.py,line=5,col=5,endLine=5,endColumn=35,title=OPX101 (clip-after-optimizer)::"
        "src/train.py:5:5: OPX101 clip_by_global_norm(1.0) runs after adamw(learning_rate=3e-4) in this chain: "
        "it clips the updates, not the gradients"
    ]
    assert outputs["lint"] == {"exit-code": "1"}
    log = json.loads((repo / "optax-lint.sarif").read_text())
    assert validator().is_valid(log)
    (result,) = log["runs"][0]["results"]
    assert result["ruleId"] == "OPX101"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/train.py"


def test_inputs_paths_args_and_a_clean_run(installed, repo: Path) -> None:
    outputs, scratch = installed
    outputs = dict(outputs)
    proc = run_step("lint", {"paths": "src/clean.py"}, outputs, repo, scratch)
    assert (proc.returncode, outputs["lint"]) == (0, {"exit-code": "0"}), proc.stderr
    assert not (repo / "optax-lint.sarif").exists()  # no sarif-file input, no SARIF
    proc = run_step("lint", {"args": "--ignore OPX101", "sarif-file": "out.sarif"}, outputs, repo, scratch)
    assert proc.returncode == 0 and json.loads((repo / "out.sarif").read_text())["runs"][0]["results"] == []


def test_inputs_cannot_inject_shell(installed, repo: Path) -> None:
    outputs, scratch = installed
    outputs = dict(outputs)
    proc = run_step("lint", {"paths": "src/clean.py $(touch${IFS}pwned) `touch pwned2` *"}, outputs, repo, scratch)
    assert not (repo / "pwned").exists() and not (repo / "pwned2").exists()
    # The odd "paths" reached optax-lint as literal names: missing paths, reported as
    # OPX003 annotations, a usage error (exit 2).
    assert proc.returncode == 2
    assert "::$(touch${IFS}pwned):1:1: OPX003 No such file or directory\n" in proc.stdout
    assert "::`touch:1:1: OPX003 No such file or directory\n" in proc.stdout


def test_readme_workflow_uses_the_action_inputs() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(# \.github/workflows/[^\n]*\n.*?)```", readme, re.S)
    uses = []
    for block in blocks:
        workflow = yaml.safe_load(block)
        for job in workflow["jobs"].values():
            uses += [s for s in job["steps"] if "optax-lint@" in s.get("uses", "")]
    assert uses, "the README shows a workflow that uses the action"
    for step in uses:
        assert set(step.get("with", {})) <= set(ACTION["inputs"])
