"""The security model (docs/security.md), tested on the hostile fixtures in tests/hostile/.

optax-lint reads files and never runs, imports or evaluates them, starts no process
and opens no socket on the lint path; it writes only the files it fixes (through a
temp file beside each). Each run below happens in a subprocess with a CPython audit
hook (PEP 578) that records every process, network, import, exec and file-system
write event; the tests then assert what was (not) done, and that no PWNED* marker
file appeared anywhere.

The verification sandbox (`--verify`, the only place optax/jax run) has its own
hostile-argument tests in tests/test_verify.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HOSTILE = Path(__file__).resolve().parent / "hostile"

_AUDITED = textwrap.dedent(
    r"""
    import json, os, sys
    log = open(os.environ["AUDIT_LOG"], "w")  # opened before the hook: not recorded
    events = []
    WATCH = ("subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
             "pty.spawn", "socket.", "os.rename", "os.remove", "os.mkdir", "os.rmdir", "os.chmod", "os.chown",
             "os.truncate", "os.symlink", "os.link", "os.utime", "shutil.", "webbrowser.", "urllib.",
             "http.", "ftplib.", "smtplib.", "ctypes.")
    WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def hook(event, args):
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (isinstance(flags, int) and flags & WRITE)
            events.append(["open-write" if writing else "open-read", str(path)])
        elif event == "exec":
            code = args[0]
            events.append(["exec", getattr(code, "co_filename", "?")])
        elif event == "compile":
            events.append(["compile", str(args[1])])
        elif event == "import":
            events.append(["import", str(args[0])])
        elif event.startswith(WATCH):
            events.append([event, repr(args)[:300]])

    sys.addaudithook(hook)
    from optax_lint.cli import main
    code = 0
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
    finally:
        modules = {name: getattr(m, "__file__", None) for name, m in list(sys.modules.items())}
        json.dump({"code": code, "events": events, "modules": modules}, log)
        log.close()
    """
)


def audited(args: list[str], cwd: Path, tmp_path: Path) -> tuple[int, str, str, dict]:
    log = tmp_path / f"audit-{time.monotonic_ns()}.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "AUDIT_LOG": str(log), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-c", _AUDITED, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    data = json.loads(log.read_text())
    log.unlink()
    return int(data["code"] or 0), proc.stdout, proc.stderr, data


def inside(path: str, root: Path) -> bool:
    """`path` (absolute, or relative to the run's cwd `root`) lies in `root`; `<string>` does not."""
    if not path or path.startswith("<"):
        return False
    try:
        return os.path.commonpath([os.path.realpath(os.path.join(root, path)), os.path.realpath(root)]) == os.path.realpath(root)
    except ValueError:
        return False


def assert_nothing_ran(data: dict, tree: Path) -> None:
    kinds = {e[0] for e in data["events"]}
    forbidden = sorted(k for k in kinds if k.startswith(("subprocess.", "os.system", "os.exec", "os.posix_spawn",
                                                          "os.spawn", "os.fork", "pty.", "socket.", "urllib.",
                                                          "http.", "webbrowser.", "ftplib.", "smtplib.")))
    assert forbidden == [], [e for e in data["events"] if e[0] in forbidden]
    user_code = [e for e in data["events"] if e[0] in ("exec", "compile") and inside(e[1], tree)]
    assert user_code == [], user_code  # user files are parsed as text, never compiled or run
    user_modules = {n: f for n, f in data["modules"].items() if f and inside(f, tree)}
    assert user_modules == {}, user_modules
    on_lint_path = sorted(n for n in data["modules"] if n.split(".")[0] in
                          ("jax", "jaxlib", "optax", "flax", "orbax", "ml_collections", "absl", "numpy", "train", "train_config", "models", "configs"))
    assert on_lint_path == [], on_lint_path
    assert list(tree.rglob("PWNED*")) == [] and not list(Path.cwd().glob("PWNED*"))


def writes(data: dict) -> list[list[str]]:
    return [e for e in data["events"] if e[0] == "open-write" or e[0].startswith(("os.rename", "os.remove", "os.mkdir",
                                                                                   "os.rmdir", "os.chmod", "os.chown",
                                                                                   "os.truncate", "os.symlink", "os.link",
                                                                                   "os.utime", "shutil."))]


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    tree = tmp_path / "hostile"
    shutil.copytree(HOSTILE, tree)
    return tree


# --- no code runs, nothing is imported, no network, no writes when linting -----------------


@pytest.mark.parametrize("project", ["shell_in_chain", "config_side_effects"])
@pytest.mark.parametrize("mode", [[], ["--show-context"], ["--diff"], ["--output-format", "json"]])
def test_linting_hostile_code_runs_nothing_and_writes_nothing(hostile: Path, tmp_path: Path, project: str, mode) -> None:
    tree = hostile / project
    code, out, err, data = audited(["-j", "1", "--no-cache", *mode, "."], tree, tmp_path)
    assert code in (0, 1), (code, out, err)
    assert_nothing_ran(data, tree)
    assert writes(data) == []
    # the files were read as text: user modules included, for the run context
    read = {os.path.relpath(os.path.join(tree, e[1]), tree) for e in data["events"] if e[0] == "open-read" and inside(e[1], tree)}
    assert "train.py" in read
    if project == "config_side_effects":
        assert {"train_config.py", "models.py", os.path.join("configs", "default.py")} <= read


def test_the_result_cache_writes_only_its_folder_under_hashed_names(hostile: Path, tmp_path: Path) -> None:
    tree = hostile / "config_side_effects"
    cache_dir = tree / ".optax_lint_cache"
    for _ in range(2):  # cold (creates the cache), then warm (answers from it)
        code, out, err, data = audited(["-j", "1", "."], tree, tmp_path)
        assert code in (0, 1), (code, out, err)
        assert_nothing_ran(data, tree)
        for event in writes(data):
            paths = [event[1]] if event[0] == "open-write" else re.findall(r"'(/[^']*)'", event[1])
            assert paths and all(inside(p, cache_dir) for p in paths), event
    names = sorted(p.relative_to(cache_dir).as_posix() for p in cache_dir.rglob("*") if p.is_file())
    assert {".gitignore", "CACHEDIR.TAG"} <= set(names), names
    for name in set(names) - {".gitignore", "CACHEDIR.TAG"}:  # named by hashes, never by a user path
        assert re.fullmatch(r"[0-9.]+/[0-9a-f]{32}\.json", name), name


def test_findings_on_hostile_code_are_the_static_ones(hostile: Path, tmp_path: Path) -> None:
    code, out, _, _ = audited(["-j", "1", "--output-format", "concise", "."], hostile / "shell_in_chain", tmp_path)
    assert code == 1
    assert out.splitlines()[:2] == [
        "train.py:23:9: OPX101 error [*] clip_by_global_norm(...) runs after adamw(...) in this chain: it clips the updates, not the gradients",
        "train.py:31:9: OPX102 error add_decayed_weights(...) runs after adam(...) negated the update: the decay is added with the wrong sign, so weights grow every step",
    ]


def test_context_comes_from_reading_the_config_modules_not_importing_them(hostile: Path, tmp_path: Path) -> None:
    tree = hostile / "config_side_effects"
    code, out, _, data = audited(["--show-context", "train.py"], tree, tmp_path)
    assert code == 0
    assert "configs/default.py:14" in out and "50_000" in out  # config.num_train_steps, read statically
    assert "models.py" in out
    assert_nothing_ran(data, tree)


@pytest.mark.parametrize("project", ["shell_in_chain", "config_side_effects"])
def test_fix_writes_only_the_fixed_files_through_temp_files_beside_them(hostile: Path, tmp_path: Path, project: str) -> None:
    tree = hostile / project
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    code, out, err, data = audited(["-j", "1", "--no-cache", "--fix", "--unsafe-fixes", "."], tree, tmp_path)
    assert code in (0, 1), (out, err)
    assert_nothing_ran(data, tree)
    changed = sorted(str(p.relative_to(tree)) for p, b in before.items() if p.read_bytes() != b)
    assert changed == ["train.py"]
    for event, detail in writes(data):
        if event == "open-write" and detail.isdigit():
            continue  # os.fdopen() of the temp file's descriptor, created just before
        if event == "open-write":
            name = os.path.basename(detail)
            assert os.path.dirname(detail) == str(tree) and name.startswith(".train.py.") and name.endswith(".optax-lint.tmp"), detail
        else:
            assert str(tree) in detail, (event, detail)  # rename/chmod/remove of that temp file only
    assert not list(tree.rglob("*.optax-lint.tmp"))
    kinds = sorted({e[0] for e in writes(data)})
    assert kinds == ["open-write", "os.chmod", "os.rename"], writes(data)


# --- hostile configuration ----------------------------------------------------------------


@pytest.mark.parametrize(
    "project, message",
    [
        ("deep_table", "optax-lint: error: pyproject.toml: [tool.optax-lint] a: nested deeper than 32 levels"),
        ("deep_inline", "optax-lint: error: pyproject.toml: invalid TOML: values nested too deeply"),
    ],
)
def test_absurdly_deep_pyproject_is_a_clean_config_error(hostile: Path, tmp_path: Path, project: str, message: str) -> None:
    start = time.monotonic()
    code, out, err, data = audited(["train.py"], hostile / project, tmp_path)
    assert code == 2 and err.strip() == message, (code, out, err)
    assert time.monotonic() - start < 60
    assert_nothing_ran(data, hostile / project)


def test_deep_pyproject_without_our_table_is_not_even_parsed(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.other]\nx = " + "[" * 100_000 + "]" * 100_000 + "\n")
    (tmp_path / "train.py").write_text("import optax\n")
    code, out, err, _ = audited(["train.py"], tmp_path, tmp_path)
    assert (code, err) == (0, "") and "All checks passed!" in out


# --- notebooks ------------------------------------------------------------------------------


def _huge_notebook(path: Path, megabytes: int) -> None:
    nb = json.loads((HOSTILE / "notebook" / "notebook_with_output.ipynb").read_text())
    blob = "iVBORw0KGgo" * (megabytes * 1024 * 1024 // 11)
    nb["cells"][1]["outputs"][0]["data"]["image/png"] = blob
    path.write_text(json.dumps(nb))


def test_notebooks_are_linted_as_text_never_run(hostile: Path, tmp_path: Path) -> None:
    tree = hostile / "notebook"
    _huge_notebook(tree / "huge.ipynb", 40)  # 40 MB of outputs: within 8 x --max-file-size
    (tree / "train.py").write_text("import optax\n")
    start = time.monotonic()
    code, out, _, data = audited(["-j", "1", "--no-cache", "--output-format", "concise", "."], tree, tmp_path)
    assert code == 1
    for line, name in zip(out.splitlines()[:2], ("huge.ipynb", "notebook_with_output.ipynb")):
        assert line.startswith(f"{name}:cell 2:4:37: OPX101 ") and "clip_by_global_norm(1.0) runs after adamw(1e-3)" in line
    assert time.monotonic() - start < 60
    assert writes(data) == []
    assert_nothing_ran(data, tree)


def test_a_notebook_too_large_is_reported_from_its_size_alone(hostile: Path, tmp_path: Path) -> None:
    tree = hostile / "notebook"
    _huge_notebook(tree / "huge.ipynb", 10)
    code, out, _, data = audited(["--no-cache", "--output-format", "concise", "--max-file-size", "1MB", "huge.ipynb"], tree, tmp_path)
    assert code == 1
    assert out.splitlines()[0] == "huge.ipynb:1:1: OPX003 error file is 10.0 MB, above the 8 MB limit for notebooks (8 x --max-file-size)"
    assert not [e for e in data["events"] if e[0].startswith("open") and e[1].endswith("huge.ipynb")]
    assert_nothing_ran(data, tree)


# --- files the cross-file reader must not follow -------------------------------------------


def test_config_module_that_is_a_fifo_or_a_device_does_not_hang(hostile: Path, tmp_path: Path) -> None:
    tree = hostile / "config_side_effects"
    (tree / "configs" / "default.py").unlink()
    os.mkfifo(tree / "configs" / "default.py")  # no writer: a blocking open would hang forever
    (tree / "train_config.py").unlink()
    (tree / "train_config.py").symlink_to("/dev/zero")  # an endless read
    code, out, err, data = audited(["-j", "1", "--output-format", "concise", "train.py"], tree, tmp_path)
    assert code == 1, (out, err)
    assert "train.py:22:7: OPX101" in out
    assert_nothing_ran(data, tree)


# --- CI integration: output formats, stdin, baseline, --diff-against -----------------------


@pytest.mark.parametrize("mode", [["--output-format", "sarif"], ["--output-format", "gitlab"], ["--output-format", "junit"]])
def test_ci_formats_write_nothing(hostile: Path, tmp_path: Path, mode) -> None:
    tree = hostile / "shell_in_chain"
    code, out, _, data = audited(["-j", "1", "--no-cache", *mode, "."], tree, tmp_path)
    assert code == 1 and out
    assert_nothing_ran(data, tree)
    assert writes(data) == []


def test_stdin_fix_writes_only_to_stdout(hostile: Path, tmp_path: Path) -> None:
    tree = hostile / "shell_in_chain"
    before = (tree / "train.py").read_bytes()
    log = tmp_path / "audit.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "AUDIT_LOG": str(log), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-c", _AUDITED, "-", "--stdin-filename", "train.py", "--fix"], cwd=tree,
                          env=env, input=before, capture_output=True, timeout=300)
    data = json.loads(log.read_text())
    assert data["code"] in (0, 1) and proc.stdout != before and b"clip_by_global_norm" in proc.stdout
    assert_nothing_ran(data, tree)
    assert writes(data) == [] and (tree / "train.py").read_bytes() == before


def test_update_baseline_writes_only_the_baseline_file(hostile: Path, tmp_path: Path) -> None:
    tree = hostile / "shell_in_chain"
    code, _, err, data = audited(["-j", "1", "--no-cache", ".", "--baseline", "base.json", "--update-baseline"], tree, tmp_path)
    assert code == 0, err
    assert_nothing_ran(data, tree)
    written = [e[1] for e in writes(data) if e[0] == "open-write" and not e[1].isdigit()]  # digits: os.fdopen of it
    assert len(written) == 1 and os.path.dirname(written[0]) == str(tree), written
    assert os.path.basename(written[0]).startswith(".base.json.") and written[0].endswith(".tmp")
    assert {e[0] for e in writes(data)} == {"open-write", "os.chmod", "os.rename"}  # the temp file renamed over base.json
    assert (tree / "base.json").is_file() and not list(tree.glob(".base.json.*"))


def test_diff_against_runs_only_git_with_fixed_arguments(hostile: Path, tmp_path: Path) -> None:
    tree = hostile / "shell_in_chain"
    git = ["git", "-c", "user.email=a@b.c", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=tree, check=True, timeout=60)
    subprocess.run([*git, "add", "."], cwd=tree, check=True, timeout=60)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=tree, check=True, timeout=60)
    (tree / "train.py").write_text((tree / "train.py").read_text() + "\n# changed\n")
    code, out, err, data = audited(["-j", "1", "--no-cache", "--diff-against", "HEAD", "."], tree, tmp_path)
    assert code in (0, 1), err
    spawned = [e for e in data["events"] if e[0].startswith(("subprocess.", "os.posix_spawn", "os.exec", "os.fork"))]
    assert spawned and all(e[0] == "subprocess.Popen" and e[1].startswith("('git', ['git', '-c', 'core.quotePath=false',") for e in spawned), spawned
    assert writes(data) == []
    # A hostile ref is refused before git sees it.
    code, _, err, data = audited(["--diff-against", "--output=PWNED", "."], tree, tmp_path)
    assert code == 2 and not [e for e in data["events"] if e[0].startswith("subprocess.")]
    assert not list(tree.rglob("PWNED*"))
