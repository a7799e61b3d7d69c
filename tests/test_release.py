"""ModuleFacts.release(): after a plain lint the facts are dropped and their reference
cycles broken, so the file's tree is freed by reference counting (the cyclic collector
used to traverse every tree once more: ~10% of a cold lint on the real corpus). It must
change no finding, and must never clear what the run shares between files."""

from __future__ import annotations

import gc
from pathlib import Path

import libcst as cst

from optax_lint.core.catalogue import load_catalogue
from optax_lint.core.config import load_settings
from optax_lint.engine import lint as engine
from optax_lint.run import api

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"


def _tree_garbage(release: bool) -> int:
    """libcst nodes left in reference cycles once one lint's results are dropped."""
    path = FIXTURES / "OPX201" / "bad_tiny_transformer_bare_adamw.py"
    codes = set(load_catalogue())
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        run = engine.lint_text(path.read_text(encoding="utf-8"), str(path), codes, release=release)
        assert [f.code for f in run.findings if f.code == "OPX201"] == ["OPX201"]
        del run
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        nodes = sum(isinstance(o, cst.CSTNode) for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    return nodes


def test_released_facts_leave_no_tree_in_reference_cycles() -> None:
    assert _tree_garbage(release=False) > 100  # what release() is for: the facts' cycles hold the tree
    assert _tree_garbage(release=True) == 0


def test_one_run_with_release_gives_each_file_s_findings_as_alone(monkeypatch) -> None:
    """All fixtures in one run (one process, the run's shared project files and tables,
    facts released after each file) find exactly what each file finds linted alone."""
    monkeypatch.chdir(ROOT)
    paths = sorted(p for p in FIXTURES.glob("OPX*/*.py") if not p.name.endswith(".fixed.py"))
    settings = load_settings(start=ROOT)
    outcome = api.run(paths, settings, api.RunOptions(jobs=1))
    together = {r.path: [(f.code, f.span, f.message) for f in r.findings] for r in outcome.results}
    codes = settings.enabled_codes()  # the same rules as the run (opt-in ones such as OPX611 stay off)
    assert codes < set(load_catalogue())
    for path in paths[::7]:  # a spread sample, each linted on its own, nothing released
        alone = engine.lint_text(path.read_text(encoding="utf-8"), api.display_path(path), codes)
        key = api.display_path(path)
        assert together[key] == [(f.code, f.span, f.message) for f in alone.findings], key


def test_the_collector_pauses_for_a_plain_lint_only(tmp_path: Path, monkeypatch) -> None:
    """A plain lint runs without cyclic GC (its facts are released after it); a fix run
    parses the file round after round, each round's facts kept for its fixes, so the
    collector stays free to run between rounds."""
    script = tmp_path / "train.py"
    script.write_text("import optax\n\ntx = optax.adam(1e-3)\n")
    seen = []
    real = api.lint_file

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "lint_file", spy)
    monkeypatch.chdir(tmp_path)
    settings = load_settings(start=tmp_path)
    was = gc.isenabled()
    api.run([script], settings, api.RunOptions(jobs=1))
    api.run([script], settings, api.RunOptions(jobs=1, fix=True))
    assert seen == [False, True]
    assert gc.isenabled() == was
