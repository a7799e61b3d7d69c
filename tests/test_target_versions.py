"""API-currency fixes respect the release the code must keep working on
(`target-versions` in the config; default: the installed release, from package
metadata without importing it; else the newest release in the table)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from optax_lint.core.catalogue import load_table
from optax_lint.core.config import ConfigError, load_settings
from optax_lint.core.target_versions import missing_in_target, target_of, version_tuple

ROOT = Path(__file__).resolve().parent.parent

OPTAX_SOURCE = textwrap.dedent(
    """\
    import optax

    def log_norms(grads):
        return optax.tree_utils.tree_l1_norm(grads), optax.add_noise(0.01, 0.55, seed=0)
    """
)
FLAX_SOURCE = textwrap.dedent(
    """\
    import optax
    from flax import nnx

    def step(model, grads):
        optimizer = nnx.Optimizer(model, optax.adam(1e-3))
        optimizer.update(grads)
    """
)


def _project(tmp_path: Path, source: str, targets: str | None) -> Path:
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    config = "[tool.optax-lint]\n" + (f"target-versions = {targets}\n" if targets else "")
    (tmp_path / "pyproject.toml").write_text(config, encoding="utf-8")
    return tmp_path / "train.py"


def _cli(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "optax_lint", str(path), *args],
        cwd=path.parent, capture_output=True, text=True, timeout=120,
    )


def test_config_parses_and_checks_target_versions(tmp_path: Path) -> None:
    (tmp_path / "optax-lint.toml").write_text('target-versions = {optax = "0.2.4", flax = "0.10"}\n', encoding="utf-8")
    settings = load_settings(start=tmp_path)
    assert settings.target_versions == {"optax": "0.2.4", "flax": "0.10"}
    assert settings.rule_options["OPX701"]["target_versions"] == {"optax": "0.2.4", "flax": "0.10"}
    for bad, said in [('{optx = "0.2.4"}', "unknown library 'optx'"), ('{optax = "new"}', "release number"), ('"0.2.4"', "expected a table")]:
        (tmp_path / "optax-lint.toml").write_text(f"target-versions = {bad}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=said):
            load_settings(start=tmp_path)


def test_a_rename_newer_than_the_target_is_not_offered(tmp_path: Path) -> None:
    path = _project(tmp_path, OPTAX_SOURCE, '{optax = "0.2.4"}')
    proc = _cli(path, "--select", "OPX701", "--output-format", "json", "--exit-zero")
    findings = json.loads(proc.stdout)
    assert len(findings) == 2, proc.stdout + proc.stderr
    for finding in findings:
        assert finding["fix"] is None
        assert "needs optax 0.2.5 or newer, and the target is optax 0.2.4 (target-versions)" in finding["help"]
    _cli(path, "--fix", "--unsafe-fixes", "--select", "OPX701")
    assert path.read_text(encoding="utf-8") == OPTAX_SOURCE  # nothing written that 0.2.4 lacks


def test_the_same_rename_is_safe_when_the_target_has_it(tmp_path: Path) -> None:
    path = _project(tmp_path, OPTAX_SOURCE, '{optax = "0.2.5"}')
    _cli(path, "--fix", "--select", "OPX701")
    fixed = path.read_text(encoding="utf-8")
    assert "optax.tree_utils.tree_norm(grads, ord=1)" in fixed and "key=0" in fixed


def test_flax_target_gates_only_the_forms_it_lacks(tmp_path: Path) -> None:
    path = _project(tmp_path, FLAX_SOURCE, '{flax = "0.10"}')
    findings = json.loads(_cli(path, "--select", "OPX703", "--output-format", "json", "--exit-zero").stdout)
    by_line = {f["line"]: f for f in findings}
    assert by_line[5]["fix"] is not None  # wrt= exists in flax 0.10
    assert by_line[6]["fix"] is None and "flax 0.11.0 or newer" in by_line[6]["help"]  # update(model, grads) does not


def test_default_target_is_the_installed_release_read_without_importing_it() -> None:
    code = (
        "import sys\n"
        "from optax_lint.core.target_versions import target_of, missing_in_target\n"
        "print(target_of('optax', {}), missing_in_target('optax.tree.norm', {}), 'optax' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    installed = __import__("importlib.metadata").metadata.version("optax")
    assert proc.stdout.split() == [installed, "None", "False"], proc.stderr


def test_without_metadata_the_newest_tabled_release_is_the_target(monkeypatch) -> None:
    from optax_lint.core import target_versions

    monkeypatch.setattr(target_versions, "installed_version", lambda library: None)
    assert target_of("optax", {}) == load_table("api_currency")["versions"]["optax"]
    assert missing_in_target("optax.tree.norm", {}) is None
    assert "optax 0.2.5" in missing_in_target("optax.tree.norm", {"optax": "0.2"})


def test_every_available_entry_is_a_release_not_newer_than_the_table() -> None:
    table = load_table("api_currency")
    for key, since in table["available"].items():
        library, _, version = since.partition(" ")
        assert version_tuple(version) <= version_tuple(table["versions"][library]), key
