"""A library's own modules are exempt from that library's currency rules, and a safe
fix can never point a module at its own package (issue 10, pattern 2).

The corpus is the installed optax: its `__init__.py` imports from `optax._src`, and
rewriting those imports to `from optax import ...` makes `import optax` fail with a
circular import.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from optax_lint.engine import lint as engine
from optax_lint.facts import api_currency as currency_extract
from optax_lint.facts.file_role import is_test_file, owning_package
from optax_lint.rules.api_currency.references import import_safe

optax = pytest.importorskip("optax")
OPTAX_DIR = Path(optax.__file__).parent
CURRENCY = {"OPX701", "OPX702", "OPX703", "OPX704"}
ROOT = Path(__file__).resolve().parent.parent


def _small_optax_tree(tmp_path: Path) -> Path:
    """optax/__init__.py, optax/_src/alias.py (optax/_src has no __init__.py) and
    optax/contrib/__init__.py, copied from the installed optax."""
    dest = tmp_path / "site" / "optax"
    for rel in ("__init__.py", "_src/alias.py", "contrib/__init__.py"):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(OPTAX_DIR / rel, target)
    return dest


def _lint(path: Path, codes=CURRENCY):
    return engine.lint_text(path.read_text(encoding="utf-8"), str(path), set(codes))


def test_owning_package_from_init_files_and_path_shape(tmp_path: Path) -> None:
    tree = _small_optax_tree(tmp_path)
    assert owning_package(str(tree / "__init__.py")) == "optax"
    assert owning_package(str(tree / "_src" / "alias.py")) == "optax"
    assert owning_package(str(tree / "contrib" / "__init__.py")) == "optax"
    script = tmp_path / "train.py"
    script.write_text("import optax\n")
    assert owning_package(str(script)) is None
    # Not on disk: the path's shape decides.
    assert owning_package("/nowhere/lib/python3.11/site-packages/flax/nnx/x.py") == "flax"
    assert owning_package("/nowhere/checkout/optax/_src/alias.py") == "optax"
    assert owning_package("/nowhere/project/train.py") is None


def test_test_files_are_recognised() -> None:
    assert is_test_file("pkg/tests/train.py")
    assert is_test_file("pkg/alias_test.py")
    assert is_test_file("test_alias.py")
    assert not is_test_file("pkg/train.py")
    assert not is_test_file("pkg/latest_model.py")


def test_optax_own_init_is_exempt_but_the_same_text_elsewhere_is_not(tmp_path: Path) -> None:
    tree = _small_optax_tree(tmp_path)
    assert [f.code for f in _lint(tree / "__init__.py").findings] == []
    assert [f.code for f in _lint(tree / "_src" / "alias.py").findings] == []
    # The control: the same text as a user's module is full of private imports.
    vendored = tmp_path / "vendored_init.py"
    shutil.copyfile(tree / "__init__.py", vendored)
    codes = {f.code for f in _lint(vendored).findings}
    assert "OPX702" in codes


def test_safe_fix_no_longer_rewrites_optax_init(tmp_path: Path) -> None:
    tree = _small_optax_tree(tmp_path)
    before = (tree / "__init__.py").read_bytes()
    result = subprocess.run(
        [sys.executable, "-m", "optax_lint", "--select", ",".join(sorted(CURRENCY)), "--fix", "--unsafe-fixes", str(tree)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tree / "__init__.py").read_bytes() == before


def test_guard_a_fix_never_points_a_module_at_its_own_package(tmp_path: Path, monkeypatch) -> None:
    tree = _small_optax_tree(tmp_path)
    init = str(tree / "__init__.py")
    assert not import_safe(init, "optax.adam")
    assert import_safe(init, "jax.tree.map")
    assert import_safe(str(tmp_path / "train.py"), "optax.adam")
    # With the exemption switched off, the rule reports optax's own init again, but
    # the guard still offers no fix that would import optax from inside optax.
    monkeypatch.setattr(currency_extract, "owning_package", lambda path: None)
    findings = [f for f in _lint(tree / "__init__.py", {"OPX702"}).findings if f.code == "OPX702"]
    assert findings
    assert all(f.fix is None or f.fix.apply is None for f in findings)


@pytest.mark.skipif(sys.platform == "win32", reason="copies and imports a package tree")
def test_fixing_the_whole_installed_optax_keeps_it_importable(tmp_path: Path) -> None:
    """End to end: `--fix --unsafe-fixes` over a copy of optax, then `import optax`."""
    site = tmp_path / "site"
    shutil.copytree(OPTAX_DIR, site / "optax", ignore=shutil.ignore_patterns("__pycache__", "*_test.py"))
    lint = subprocess.run(
        [sys.executable, "-m", "optax_lint", "--select", "OPX", "--fix", "--unsafe-fixes", str(site / "optax")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert lint.returncode in (0, 1), lint.stdout[-2000:] + lint.stderr[-2000:]
    imported = subprocess.run(
        [sys.executable, "-c", "import optax, sys; print(optax.__file__); optax.adamw(1e-3)"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site), "JAX_PLATFORMS": "cpu"},
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert imported.stdout.strip().startswith(str(site))
