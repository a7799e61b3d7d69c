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


# --- the project's own dependency pins -------------------------------------------------

from optax_lint.facts.project.pins import parse_requirement  # noqa: E402


@pytest.mark.parametrize(
    "line, excludes, allows",
    [
        ("flax>0.10.6,<0.11.0", "0.11.0", "0.10.9"),
        ("flax <= 0.10.6", "0.10.7", "0.10.6"),
        ("flax==0.10.6", "0.10.7", "0.10.6"),
        ("flax==0.10.*", "0.11.0", "0.10.99"),
        ("flax~=0.10.2", "0.11.0", "0.10.9"),
        ("jax[cuda12] (<0.5)", "0.5.0", "0.4.38"),
        ("orbax-checkpoint<0.6 ; python_version >= '3.10'", "0.6.0", "0.5.9"),
    ],
)
def test_a_requirement_with_an_upper_bound_is_a_pin(line: str, excludes: str, allows: str) -> None:
    pin = parse_requirement(line, "pyproject.toml")
    assert pin is not None and pin.excludes(excludes) and not pin.excludes(allows)


@pytest.mark.parametrize("line", ["flax>=0.10", "flax", "numpy<2", "flax!=0.10.1", "# flax<0.11", "flaxformer<1"])
def test_a_requirement_without_an_upper_bound_on_a_tracked_library_is_no_pin(line: str) -> None:
    assert parse_requirement(line, "requirements.txt") is None


def _lint_json(path: Path, *args: str) -> list[dict]:
    proc = _cli(path, "--no-cache", "--output-format", "json", "--exit-zero", *args)
    return json.loads(proc.stdout)


def test_flax_pinned_below_the_break_in_pyproject_is_a_migration_note(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(FLAX_SOURCE, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\ndependencies = ["optax>=0.2", "flax>0.10.6,<0.11.0"]\n', encoding="utf-8"
    )
    by_line = {f["line"]: f for f in _lint_json(tmp_path / "train.py", "--select", "OPX703")}
    assert sorted(by_line) == [5, 6]
    assert {f["severity"] for f in by_line.values()} == {"warning"}
    for finding in by_line.values():
        assert "the project pins flax>0.10.6,<0.11.0 in pyproject.toml, which still accepts it: when you upgrade past it, " in finding["message"]
    assert by_line[5]["fix"] is not None  # wrt= exists on both sides of the pin
    assert by_line[6]["fix"] is None  # update(model, grads) would break the pinned flax
    assert "needs flax 0.11.0 or newer, and the project pins flax>0.10.6,<0.11.0" in by_line[6]["help"]


def test_a_pin_that_allows_the_break_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(FLAX_SOURCE, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("flax>=0.10,<0.13\n", encoding="utf-8")
    findings = _lint_json(tmp_path / "train.py", "--select", "OPX703")
    assert [f["severity"] for f in findings] == ["error", "error"]
    assert all("TypeError in flax" in f["message"] for f in findings)


def test_configured_target_outranks_the_pin_and_lowers_the_severity(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(FLAX_SOURCE, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\ndependencies = ["flax<0.13"]\n\n[tool.optax-lint]\ntarget-versions = {flax = "0.10.6"}\n',
        encoding="utf-8",
    )
    findings = _lint_json(tmp_path / "train.py", "--select", "OPX703")
    assert [f["severity"] for f in findings] == ["warning", "warning"]
    assert all("the target is flax 0.10.6 (target-versions), which still accepts it" in f["message"] for f in findings)


def test_a_removed_jax_api_under_a_jax_pinned_before_the_removal(tmp_path: Path) -> None:
    source = "import jax\n\n\ndef replicate(x, devices):\n    return jax.device_put_replicated(x, devices)\n"
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("# runtime\njax[tpu]==0.4.30\noptax\n", encoding="utf-8")
    [finding] = _lint_json(tmp_path / "train.py", "--select", "OPX704")
    assert finding["severity"] == "warning"
    assert ("is removed from jax 0.10.0 (AttributeError there); the project pins jax==0.4.30 in requirements.txt, "
            "which still has it: when you upgrade past it, use ") in finding["message"]
    (tmp_path / "requirements.txt").write_text("jax\n", encoding="utf-8")
    [finding] = _lint_json(tmp_path / "train.py", "--select", "OPX704")
    assert finding["severity"] == "error" and "was removed (AttributeError in jax" in finding["message"]


def test_a_removed_optax_name_under_an_optax_pinned_before_the_removal(tmp_path: Path) -> None:
    """optax.additive_weight_decay is exported through 0.1.7 and gone from 0.1.8 (the
    published wheels): a project pinned to 0.1.3 gets an upgrade note, one pinned at or
    past 0.1.8 (or unpinned) the error."""
    source = "import optax\n\ntx = optax.chain(optax.additive_weight_decay(1e-4), optax.sgd(0.1))\n"
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("optax==0.1.3\n", encoding="utf-8")
    [finding] = _lint_json(tmp_path / "train.py", "--select", "OPX701")
    assert finding["severity"] == "warning"
    assert "is removed from optax 0.1.8 (AttributeError there); the project pins optax==0.1.3 in requirements.txt" in finding["message"]
    (tmp_path / "requirements.txt").write_text("optax==0.1.8\n", encoding="utf-8")
    [finding] = _lint_json(tmp_path / "train.py", "--select", "OPX701")
    assert finding["severity"] == "error"


def test_a_jax_pin_holds_flax_below_its_break(tmp_path: Path) -> None:
    """flax 0.10.5 and later need jax>=0.5.1 and 0.11.0 needs jax>=0.6.0 (the published
    wheels' Requires-Dist): a project that pins jax==0.4.38 installs flax 0.10.4 at most,
    where nnx.Optimizer(model, tx) and update(grads) are the API. A migration note, and no
    fix that writes the 0.11 form."""
    (tmp_path / "train.py").write_text(FLAX_SOURCE, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\ndependencies = ["flax>=0.10.4", "jax==0.4.38", "optax>=0.2.4"]\n', encoding="utf-8"
    )
    by_line = {f["line"]: f for f in _lint_json(tmp_path / "train.py", "--select", "OPX703")}
    assert sorted(by_line) == [5, 6]
    assert {f["severity"] for f in by_line.values()} == {"warning"}
    for finding in by_line.values():
        assert ("the flax the project can install (jax==0.4.38 in pyproject.toml keeps it below 0.10.5, "
                "which needs jax 0.5.1 or newer), which still accepts it: when you upgrade past it, ") in finding["message"]
    assert by_line[6]["fix"] is None
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\ndependencies = ["flax>=0.10.4", "jax>=0.6,<0.9"]\n', encoding="utf-8"
    )
    assert [f["severity"] for f in _lint_json(tmp_path / "train.py", "--select", "OPX703")] == ["error", "error"]


def test_a_deprecated_api_whose_replacement_the_pin_lacks_is_an_upgrade_note(tmp_path: Path) -> None:
    """jax.experimental.shard_map warns from jax 0.8.0; jax.shard_map exists from 0.6.1.
    Under jax<=0.4.37 the advice cannot be followed: an info note for the upgrade, no fix.
    Unpinned, the warning and its fix stand."""
    source = (
        "from jax.experimental.shard_map import shard_map\n\n\n"
        "def run(f, mesh, spec):\n    return shard_map(f, mesh=mesh, in_specs=spec, out_specs=spec)\n"
    )
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\ndependencies = ["jax <= 0.4.37", "optax"]\n', encoding="utf-8"
    )
    [finding] = _lint_json(tmp_path / "train.py", "--select", "OPX704")
    assert finding["severity"] == "info" and finding["fix"] is None
    assert ("but jax.shard_map needs jax 0.6.1 or newer, and the project pins jax<=0.4.37 in pyproject.toml: "
            "when you upgrade past it, use jax.shard_map") in finding["message"]
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\ndependencies = ["jax", "optax"]\n', encoding="utf-8")
    [finding] = _lint_json(tmp_path / "train.py", "--select", "OPX704")
    assert finding["severity"] == "warning" and finding["fix"] is not None


def test_poetry_setup_py_and_extras_are_read_as_written(tmp_path: Path) -> None:
    from optax_lint.facts.project import pins

    poetry = '[tool.poetry.dependencies]\npython = "^3.9"\njax = "^0.4.8"\nflax = {version = "~0.6.8", optional = true}\noptax = "0.1.4"\n'
    found = {line.split("<")[0].split("=")[0]: (line, shown) for line, _, shown in pins._pyproject_requirements(poetry)}
    assert found["jax"] == ("jax<0.5.0", 'jax = "^0.4.8"')
    assert found["flax"] == ("flax<0.7.0", 'flax = "~0.6.8"')
    assert found["optax"] == ("optax==0.1.4", 'optax = "0.1.4"')
    assert pins._caret_or_tilde("^", "1.2.3") == (2, 0, 0) and pins._caret_or_tilde("^", "0.0.3") == (0, 0, 4)
    extras = '[project]\nname = "x"\ndependencies = ["numpy"]\n[project.optional-dependencies]\njax = ["jax==0.4.8", "optax==0.1.4"]\n'
    assert ("jax==0.4.8", "pyproject.toml (extra 'jax')") in pins._pyproject_requirements(extras)
    setup = 'reqs = ["numpy", "jax==0.3.22", "flax==0.6.2"]\nsetup(name="x", install_requires=reqs, description="jax>=0 fan")\n'
    assert [r for r, _ in pins._setup_py_requirements(setup)] == ["jax==0.3.22", "flax==0.6.2"]
    assert pins._setup_py_requirements("def broken(:\n") == []

    source = "import jax\n\n\ndef replicate(x, devices):\n    return jax.device_put_replicated(x, devices)\n"
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(poetry, encoding="utf-8")
    [finding] = _lint_json(tmp_path / "train.py", "--select", "OPX704")
    assert finding["severity"] == "warning"
    assert 'the project pins jax = "^0.4.8" in pyproject.toml (Poetry), which still has it' in finding["message"]


def test_show_context_names_the_pins_it_judges_against(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(FLAX_SOURCE, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("flax==0.10.*\njax<0.5  # old TPU pods\n", encoding="utf-8")
    out = _cli(tmp_path / "train.py", "--show-context").stdout
    assert ("library pins: flax==0.10.* (requirements.txt); jax<0.5 (requirements.txt); "
            "optax<0.2.6 (held by jax<0.5 in requirements.txt): API changes after them are migration notes") in out
    (tmp_path / "requirements.txt").write_text("flax\n", encoding="utf-8")
    assert "library pins" not in _cli(tmp_path / "train.py", "--show-context").stdout


def test_flax_checkpoints_under_a_flax_pinned_before_its_deprecation(tmp_path: Path) -> None:
    """flax.training.checkpoints warns from flax 0.6.7 (save) and 0.6.8 (restore), read in
    the published wheels; under flax==0.6.1 it is the checkpoint API, so OPX505's note is
    for the upgrade. Unpinned, the note is about the installed flax."""
    source = (
        "from flax.training import checkpoints\n\n\n"
        "def save(state, step):\n    checkpoints.save_checkpoint('ckpt', target=state, step=step)\n"
    )
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("flax==0.6.1\noptax\n", encoding="utf-8")
    [finding] = _lint_json(tmp_path / "train.py", "--select", "OPX505")
    assert ("save_checkpoint is deprecated from flax 0.6.7 in favour of orbax; the project pins flax==0.6.1 in "
            "requirements.txt, which predates it; use ") in finding["message"]
    assert finding["message"].endswith(" when you upgrade past it")
    (tmp_path / "requirements.txt").write_text("flax\n", encoding="utf-8")
    [finding] = _lint_json(tmp_path / "train.py", "--select", "OPX505")
    assert "is the legacy Flax checkpoint API (flax 0.12.8 only forwards it" in finding["message"]


def test_pjit_under_a_jax_pinned_before_its_deprecation_and_maps_before_its_removal(tmp_path: Path) -> None:
    """jax.experimental.pjit.pjit warns from jax 0.8.0 and jax.experimental.maps is gone
    from 0.4.31 (read in the published wheels): under jax==0.4.7 the first is an info
    note and the second a warning, both for the upgrade; unpinned, a warning and an error."""
    source = "from jax.experimental.maps import Mesh\nfrom jax.experimental.pjit import pjit\n"
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("jax==0.4.7\n", encoding="utf-8")
    by_line = {f["line"]: f for f in _lint_json(tmp_path / "train.py", "--select", "OPX704")}
    assert by_line[2]["severity"] == "info"
    assert "is deprecated from jax 0.8.0; the project pins jax==0.4.7 in requirements.txt, which does not warn: when you upgrade past it" in by_line[2]["message"]
    assert by_line[1]["severity"] == "warning"
    assert "is removed from jax 0.4.31 (ModuleNotFoundError there); the project pins jax==0.4.7" in by_line[1]["message"]
    (tmp_path / "requirements.txt").write_text("jax\n", encoding="utf-8")
    by_line = {f["line"]: f for f in _lint_json(tmp_path / "train.py", "--select", "OPX704")}
    assert (by_line[1]["severity"], by_line[2]["severity"]) == ("error", "warning")


def test_a_private_optax_name_under_a_jax_pin_that_holds_optax_back(tmp_path: Path) -> None:
    """optax 0.2.3 moved update_moment and bias_correction out of optax._src.transform and
    needs jax>=0.4.27 (both read in the published wheels): a project that pins
    jax==0.3.17 installs optax 0.2.2 at most, where the import works. A migration note."""
    source = "from optax._src.transform import update_moment, bias_correction\n"
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("jax==0.3.17\nflax==0.5.3\n", encoding="utf-8")
    [finding] = _lint_json(tmp_path / "train.py", "--select", "OPX702")
    assert finding["severity"] == "warning"
    assert ("no longer defines update_moment, bias_correction from optax 0.2.3; the optax the project can install "
            "(jax==0.3.17 in requirements.txt keeps it below 0.2.3, which needs jax 0.4.27 or newer), which still does") in finding["message"]
    (tmp_path / "requirements.txt").write_text("jax\n", encoding="utf-8")
    [finding] = _lint_json(tmp_path / "train.py", "--select", "OPX702")
    assert finding["severity"] == "error" and "ImportError in optax" in finding["message"]


def test_a_removed_private_optax_module_under_an_optax_pinned_before_its_removal(tmp_path: Path) -> None:
    """optax._src.clipping is in every wheel through 0.2.6 and gone from 0.2.7: under
    optax==0.2.3 the attribute path works, and the finding is a note for the upgrade."""
    source = "from optax._src import clipping\n\nclip = clipping.per_example_global_norm_clip\n"
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    (tmp_path / "requirements.txt").write_text("optax==0.2.3\n", encoding="utf-8")
    findings = _lint_json(tmp_path / "train.py", "--select", "OPX702")
    assert findings and {f["severity"] for f in findings} == {"warning"}
    assert all("is gone from optax 0.2.7; the project pins optax==0.2.3 in requirements.txt, which still has it" in f["message"] for f in findings)
    (tmp_path / "requirements.txt").write_text("optax\n", encoding="utf-8")
    assert {f["severity"] for f in _lint_json(tmp_path / "train.py", "--select", "OPX702")} == {"error"}
