"""The result cache (optax_lint/run/cache.py): same findings as without it, whatever happened
to the files, the files they read, or the cache itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from optax_lint import __version__
from optax_lint.cli import main
from optax_lint.core.config import load_settings
from optax_lint.run import api, cache

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[1]

UNRELATED = "import os\n\n\ndef home():\n    return os.environ.get('HOME')\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A training script reading configs/default.py (OPX303 depends on it), a script with
    a fixable finding, and an unrelated module."""
    root = tmp_path / "proj"
    (root / "configs").mkdir(parents=True)
    shutil.copy(FIXTURES / "OPX303" / "bad_config_horizon.py", root / "train.py")
    shutil.copy(FIXTURES / "OPX303" / "configs" / "default.py", root / "configs" / "default.py")
    shutil.copy(FIXTURES / "OPX101" / "bad_clip_after_adamw.py", root / "chain.py")
    (root / "utils.py").write_text(UNRELATED)
    (root / "optax-lint.toml").write_text("")
    return root


def files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if ".optax_lint_cache" not in p.parts)


def lint(root: Path, *, cache_dir=None, **options) -> list[tuple]:
    settings = load_settings(start=root)
    outcome = api.run(files(root), settings, api.RunOptions(cache_dir=cache_dir, **options))
    return [(f.path, f.span, f.code, f.message, f.fixable(True)) for r in outcome.results for f in r.findings]


def forbid_linting(monkeypatch) -> None:
    def fail(*args, **kwargs):
        raise AssertionError("linted a file the cache should have answered")

    monkeypatch.setattr(api, "lint_file", fail)


def bump_mtime(path: Path, seconds: int = -10) -> None:
    """Move a file's mtime into the past so its entry is not 'racily clean'."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


def test_warm_run_answers_from_the_cache_with_identical_findings(project: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(project)
    for p in files(project):
        bump_mtime(p)
    uncached = lint(project)
    cache_dir = tmp_path / "c"
    assert lint(project, cache_dir=cache_dir) == uncached  # cold: fills the cache
    assert {c for _, _, c, _, _ in uncached} >= {"OPX101", "OPX303"}
    with monkeypatch.context() as m:
        forbid_linting(m)
        assert lint(project, cache_dir=cache_dir) == uncached  # warm: nothing linted
    assert (cache_dir / ".gitignore").read_text().strip().endswith("*")
    assert (cache_dir / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")


def test_a_cached_finding_keeps_its_help_line(project: Path, tmp_path: Path, monkeypatch) -> None:
    """The full format's `= help:` line comes from the finding: a warm run prints it too
    (it used to be dropped for findings without a fix)."""
    monkeypatch.chdir(project)
    for p in files(project):
        bump_mtime(p)
    settings = load_settings(start=project)
    cache_dir = tmp_path / "c"

    def helps() -> list[tuple]:
        outcome = api.run(files(project), settings, api.RunOptions(cache_dir=cache_dir))
        return [(f.path, f.code, f.help_text) for r in outcome.results for f in r.findings]

    cold = helps()
    assert any(code == "OPX303" and text for _, code, text in cold)  # a finding without a fix, with help
    with monkeypatch.context() as m:
        forbid_linting(m)
        assert helps() == cold


def test_an_edited_file_is_linted_again(project: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(project)
    cache_dir = tmp_path / "c"
    lint(project, cache_dir=cache_dir)
    chain = project / "chain.py"
    chain.write_text(chain.read_text().replace("# expect: OPX101", "# expect: OPX101\n        optax.adam(1e-3),"))
    assert lint(project, cache_dir=cache_dir) == lint(project)
    # Same size and mtime as what was cached, different bytes: the entry was written
    # within RACY_NS of the file's mtime, so its content is checked.
    utils = project / "utils.py"
    st = utils.stat()
    broken = UNRELATED.replace("get('HOME')", "get('HOME'(")
    assert len(broken) == len(UNRELATED)
    utils.write_text(broken)
    os.utime(utils, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert utils.stat().st_size == st.st_size
    after = lint(project, cache_dir=cache_dir)
    assert after == lint(project) and any(p.endswith("utils.py") and c == "OPX001" for p, _, c, _, _ in after)


def test_a_touched_but_unchanged_file_still_hits(project: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(project)
    cache_dir = tmp_path / "c"
    expected = lint(project, cache_dir=cache_dir)
    for p in files(project):
        bump_mtime(p, 5)
    with monkeypatch.context() as m:
        forbid_linting(m)
        assert lint(project, cache_dir=cache_dir) == expected


def test_editing_a_config_module_a_script_reads_invalidates_the_script(project: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(project)
    cache_dir = tmp_path / "c"
    before = lint(project, cache_dir=cache_dir)
    assert any(p.endswith("train.py") and c == "OPX303" for p, _, c, _, _ in before)
    config = project / "configs" / "default.py"
    config.write_text(config.read_text().replace("200_000", "100_000"))  # now the schedule fits the run
    after = lint(project, cache_dir=cache_dir)
    assert after == lint(project)
    assert not any(p.endswith("train.py") and c == "OPX303" for p, _, c, _, _ in after)
    # A config file appearing where the script looks for one is part of the key too.
    (project / "configs" / "zzz_other.py").write_text("def get_config():\n  return None\n")
    assert lint(project, cache_dir=cache_dir) == lint(project)


def test_a_helper_module_appearing_invalidates_every_script_that_looked_for_it(tmp_path: Path, monkeypatch) -> None:
    # Two scripts import trainlib.checkpoint before it exists. The run answers "is it a
    # file?" once (ProjectFiles.probes); the second script's entry must still record
    # the probe, or its cached "no finding" would outlive the module's arrival.
    root = tmp_path / "proj"
    root.mkdir()
    (root / "optax-lint.toml").write_text("")
    for name in ("a.py", "b.py"):
        shutil.copy(FIXTURES / "OPX501" / "bad_helper_module_saves_params.py", root / name)
    monkeypatch.chdir(root)
    cache_dir = tmp_path / "c"
    assert lint(root, cache_dir=cache_dir) == []
    shutil.copytree(FIXTURES / "OPX501" / "trainlib", root / "trainlib")
    after = lint(root, cache_dir=cache_dir)
    assert after == lint(root)
    assert sorted((Path(p).name, span.line, code) for p, span, code, _, _ in after if code == "OPX501") == [
        ("a.py", 37, "OPX501"),
        ("b.py", 37, "OPX501"),
    ]


@pytest.mark.parametrize(
    "damage",
    [
        lambda f: f.write_text("not json at all"),
        lambda f: f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2]),  # a half-written file
        lambda f: f.write_bytes(b"\xff\xfe\x00garbage"),
        lambda f: f.unlink(),
        "bad-entry",
    ],
)
def test_a_corrupt_cache_never_breaks_a_run_or_changes_its_answer(project: Path, tmp_path: Path, monkeypatch, damage) -> None:
    monkeypatch.chdir(project)
    cache_dir = tmp_path / "c"
    expected = lint(project)
    lint(project, cache_dir=cache_dir)
    (stored,) = (cache_dir / __version__).glob("*.json")
    if damage == "bad-entry":  # a well-formed file (valid checksum) with nonsense in it
        body = json.loads(stored.read_text().split("\n", 1)[1])
        for entry in body["entries"].values():
            entry["findings"] = [{"code": 3}] if entry["findings"] else "nope"
        body["entries"]["/nonexistent.py"] = 7
        text = json.dumps(body)
        stored.write_text(cache.hashlib.blake2b(text.encode(), digest_size=16).hexdigest() + "\n" + text)
    else:
        damage(stored)
    assert lint(project, cache_dir=cache_dir) == expected
    assert lint(project, cache_dir=cache_dir) == expected  # and the cache is whole again


def test_concurrent_runs_agree_and_leave_a_valid_cache(project: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "optax_lint", ".", "--output-format", "concise", "-j", "1"]
    expected = subprocess.run([*cmd, "--no-cache"], cwd=project, env=env, capture_output=True, text=True, timeout=120).stdout
    procs = [subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    assert outputs == [expected] * 4
    again = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=120).stdout
    assert again == expected
    (stored,) = (project / ".optax_lint_cache" / __version__).glob("*.json")
    assert len(cache._read_entries(stored)) == 4
    assert not list((project / ".optax_lint_cache").rglob(".tmp-*"))


def test_fix_runs_never_return_stale_results(project: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(project)
    cache_dir = tmp_path / "c"
    for p in files(project):
        bump_mtime(p)
    before = lint(project, cache_dir=cache_dir)
    assert any(p.endswith("chain.py") and c == "OPX101" and fixable for p, _, c, _, fixable in before)
    settings = load_settings(start=project)
    outcome = api.run(files(project), settings, api.RunOptions(cache_dir=cache_dir, fix=True))
    assert outcome.fixed >= 1
    assert not any(f.code == "OPX101" for r in outcome.results for f in r.findings)
    assert "clip_by_global_norm(cfg.max_grad_norm),  # expect: OPX101\n        optax.adamw" in (project / "chain.py").read_text()
    assert lint(project, cache_dir=cache_dir) == lint(project)  # the fixed file, not the cached one


def test_a_new_tool_version_or_other_settings_do_not_reuse_entries(project: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(project)
    cache_dir = tmp_path / "c"
    lint(project, cache_dir=cache_dir)
    monkeypatch.setattr(cache, "_FINGERPRINT", ["another build"])
    with monkeypatch.context() as m:
        forbid_linting(m)
        with pytest.raises(AssertionError, match="cache should have answered"):
            lint(project, cache_dir=cache_dir)
    settings = load_settings(start=project, overrides={"ignore": ["OPX303"]})
    outcome = api.run(files(project), settings, api.RunOptions(cache_dir=cache_dir))
    assert not any(f.code == "OPX303" for r in outcome.results for f in r.findings)


def test_cli_cache_options_and_clean(project: Path) -> None:
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(project)
    try:
        first = runner.invoke(main, [".", "--output-format", "concise", "--no-cache"])
        assert not (project / ".optax_lint_cache").exists()
        default = runner.invoke(main, [".", "--output-format", "concise"])
        assert default.output == first.output and (project / ".optax_lint_cache" / "CACHEDIR.TAG").is_file()
        other = runner.invoke(main, [".", "--output-format", "concise", "--cache-dir", "elsewhere"])
        assert other.output == first.output and (project / "elsewhere" / "CACHEDIR.TAG").is_file()
        assert runner.invoke(main, ["clean"]).exit_code == 0
        assert not (project / ".optax_lint_cache").exists()
        assert runner.invoke(main, ["clean", "--cache-dir", "elsewhere"]).exit_code == 0
        assert not (project / "elsewhere").exists()
        (project / "precious").mkdir()
        refused = runner.invoke(main, ["clean", "--cache-dir", "precious"])
        assert refused.exit_code == 2 and (project / "precious").is_dir()  # not a cache folder: kept
    finally:
        os.chdir(cwd)


def test_a_read_only_cache_folder_is_no_error(project: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(project)
    blocker = tmp_path / "file-not-folder"
    blocker.write_text("")
    assert lint(project, cache_dir=blocker / "cache") == lint(project)


def test_a_notebook_is_answered_from_the_cache_with_its_code_frames(project: Path, monkeypatch) -> None:
    """Notebooks are cached like scripts: a warm run lints nothing and prints the same
    report, code frames of the cells included (the cells are rebuilt from the file)."""
    shutil.copy(FIXTURES / "notebooks" / "colab_train.ipynb", project / "colab_train.ipynb")
    monkeypatch.chdir(project)
    bump_mtime(project / "colab_train.ipynb")
    runner = CliRunner()
    uncached = runner.invoke(main, ["colab_train.ipynb", "--no-cache"])
    assert "colab_train.ipynb:cell" in uncached.output and " | " in uncached.output  # findings with code frames
    cold = runner.invoke(main, ["colab_train.ipynb"])
    assert cold.output == uncached.output
    with monkeypatch.context() as m:
        forbid_linting(m)
        warm = runner.invoke(main, ["colab_train.ipynb"])
    assert warm.output == uncached.output and warm.exit_code == uncached.exit_code
    (project / "colab_train.ipynb").write_text((project / "colab_train.ipynb").read_text().replace("0.1", "0.2"))
    with monkeypatch.context() as m:
        forbid_linting(m)
        with pytest.raises(AssertionError, match="linted a file the cache should have answered"):
            api.run([project / "colab_train.ipynb"], load_settings(start=project), api.RunOptions(cache_dir=project / ".optax_lint_cache"))
