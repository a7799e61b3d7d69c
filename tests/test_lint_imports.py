"""What a lint run imports, observed in a real process (`sys.modules` after the CLI ran).

- The plain lint path never imports jax or optax (about 1.9 s and 155 MiB on their own).
- A pre-commit run over files no selected rule family can fire on (the raw-text
  prefilter rules them out) imports neither libcst (~0.25 s) nor the facts nor any rule
  module: those files only get CPython's syntax check. Without a config file it imports
  no TOML parser and no pathspec either.
- A run over an optax-using file imports only the rule modules of the families its text
  triggers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from optax_lint.rules import registry

ROOT = Path(__file__).resolve().parent.parent

_RUN = textwrap.dedent(
    """\
    import json, runpy, sys
    sys.argv = ["optax-lint", *sys.argv[1:]]
    code = None
    try:
        runpy.run_module("optax_lint", run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    print("@@" + json.dumps({"exit": code, "modules": sorted(sys.modules)}))
    """
)

PLAIN = textwrap.dedent(
    """\
    import os


    def data_dir(root):
        return os.path.join(root, "data")  # noqa: OPX101
    """
)

TRAINING = textwrap.dedent(
    """\
    import optax

    tx = optax.chain(
        optax.adamw(learning_rate=3e-4),
        optax.clip_by_global_norm(1.0),
    )
    """
)


def _lint(cwd: Path, *args: str) -> tuple[dict, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPTAX_LINT_NO_PROGRESS": "1"}
    proc = subprocess.run([sys.executable, "-c", _RUN, "--output-format", "concise", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    line = next(l for l in proc.stdout.splitlines() if l.startswith("@@"))
    return json.loads(line[2:]), proc.stdout


def _loaded(modules: list[str], *roots: str) -> list[str]:
    return sorted(m for m in modules if any(m == r or m.startswith(r + ".") for r in roots))


def _rule_modules(modules: list[str]) -> list[str]:
    """Rule modules proper (the family packages hold only the prefilter's TRIGGERS)."""
    families = set(registry.family_packages().values()) | {"optax_lint.rules.registry"}
    return sorted(m for m in modules if m.startswith("optax_lint.rules.") and m not in families)


def test_prefiltered_out_files_import_no_libcst_facts_or_rule(tmp_path: Path) -> None:
    for i in range(4):
        (tmp_path / f"util_{i}.py").write_text(PLAIN, encoding="utf-8")
    report, out = _lint(tmp_path, "--no-cache", "--extend-select", "OPX002", *(f"util_{i}.py" for i in range(4)))
    # The files were checked: the unused noqa on each is reported (so the run did look at them).
    assert out.count("OPX002") == 4, out
    assert _loaded(report["modules"], "libcst", "jax", "optax", "flax", "orbax") == []
    assert _loaded(report["modules"], "optax_lint.facts.module", "optax_lint.syntax.walker") == []
    assert _rule_modules(report["modules"]) == []
    # The catalogue comes from its parsed bundle (rules/_parsed.json), and named files
    # need no exclude patterns: neither the TOML parser (~90 ms on the catalogue) nor
    # pathspec (~20 ms to import) is paid.
    assert _loaded(report["modules"], "tomllib", "tomli", "pathspec") == []


def test_prefiltered_out_files_with_the_result_cache_import_no_libcst(tmp_path: Path) -> None:
    (tmp_path / "util.py").write_text(PLAIN.replace("  # noqa: OPX101", ""), encoding="utf-8")
    for _ in range(2):  # cold (fills the cache), then warm
        report, out = _lint(tmp_path, "util.py")
        assert report["exit"] == 0, out
        assert _loaded(report["modules"], "libcst", "jax", "optax") == []


def test_optax_file_imports_no_jax_and_only_triggered_rules(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAINING, encoding="utf-8")
    (tmp_path / "util.py").write_text(PLAIN, encoding="utf-8")
    report, out = _lint(tmp_path, "--no-cache", "--select", "OPX101,OPX401", "train.py", "util.py")
    assert "train.py:5:5: OPX101" in out, out
    assert _loaded(report["modules"], "jax", "optax", "flax", "orbax") == []
    assert "libcst" in report["modules"]
    rules = _rule_modules(report["modules"])
    # The selected codes' rule modules and their helpers, nothing of an unselected rule.
    assert "optax_lint.rules.chain_order.clip_after_optimizer" in rules
    assert "optax_lint.rules.multi_device.pmap_gradients_not_averaged" in rules
    others = {registry.rule_class(c).__module__ for c in registry.family_packages() if c not in ("OPX101", "OPX401")}
    assert not others & set(rules), sorted(others & set(rules))
