"""A run raises the GC's collection thresholds while it lints, and puts them back."""

from __future__ import annotations

import gc
from pathlib import Path

from optax_lint.run import api


def test_run_collects_less_often_and_restores_the_thresholds(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "train.py").write_text("import optax\ntx = optax.sgd(0.1)\n", encoding="utf-8")
    seen = []
    real = api.lint_file

    def spy(*args, **kwargs):
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "lint_file", spy)
    before = gc.get_threshold()
    results = api.lint_paths([str(tmp_path / "train.py")])
    assert len(results) == 1 and seen == [api.GC_THRESHOLDS]
    assert gc.get_threshold() == before
