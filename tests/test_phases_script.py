"""benchmarks/phases.py patches the engine's entry points by name: a rename must fail
here, not leave a phase silently empty (its time would move to "the rest")."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_phases_attributes_a_cold_run_to_the_engine_phases(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(ROOT / "examples" / "train_transformer.py", corpus / "train.py")
    (corpus / "quiet.py").write_text("import optax\n\nopt = optax.sgd(0.1)\n", encoding="utf-8")
    (corpus / "files.txt").write_text("train.py\nquiet.py\n", encoding="utf-8")
    out = tmp_path / "phases.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "phases.py"), "--corpus", str(corpus),
                           "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    phases = report["phases"]
    assert phases["libcst parse, linted files"]["calls"] == 2
    assert phases["walker (scopes, bindings, calls)"]["calls"] >= 2
    assert phases["ast.parse (syntax check, positions)"]["calls"] >= 2
    assert phases["positions of what is reported"]["calls"] >= 1  # train.py has findings
    assert any(key.startswith("rule OPX") for key in phases)
    assert report["rest_cpu"] >= 0
    assert sum(p["cpu"] for p in phases.values()) <= report["total_cpu"] + 1e-6
    assert "ratio" in proc.stdout and "| libcst parse, linted files |" in proc.stdout
