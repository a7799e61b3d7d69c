"""OPX406 and the project's readers of a replicated checkpoint (facts/parallel/readers.py):
the save is the project's format only when every script beside it that reads the
directory back restores it as saved and unreplicates it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "OPX406"
TRAIN = (FIXTURES / "good_replicated_checkpoint_read_by_eval.py").read_text(encoding="utf-8")
READER = (FIXTURES / "good_replicated_checkpoint_eval_reader.py").read_text(encoding="utf-8")
SAVE_LINE = next(i for i, line in enumerate(TRAIN.splitlines(), 1) if "save_checkpoint(CKPT_DIR" in line)


def _opx406(tmp_path: Path, readers: dict[str, str]) -> list[tuple[int, str]]:
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    for name, text in readers.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "optax_lint", "train.py", "--no-cache", "--select", "OPX406", "--output-format", "json", "--exit-zero"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    return [(f["line"], f["code"]) for f in json.loads(proc.stdout)]


def test_reader_that_unreplicates_makes_the_layout_the_projects(tmp_path: Path) -> None:
    assert _opx406(tmp_path, {"eval.py": READER}) == []


def test_no_reader_leaves_the_finding(tmp_path: Path) -> None:
    assert _opx406(tmp_path, {}) == [(SAVE_LINE, "OPX406")]


@pytest.mark.parametrize(
    "reader",
    [
        # restored into a template: the shapes must match, and they do not
        READER.replace('restore_checkpoint("_energy_checkpoint", None)', 'restore_checkpoint("_energy_checkpoint", template)'),
        # restored as saved, used without unreplicate: a leading device axis on every leaf
        READER.replace('unreplicate(state["params"])', 'state["params"]'),
        # indexed in the call's statement: not followed, so not counted as unreplicated
        READER.replace('restore_checkpoint("_energy_checkpoint", None)', 'restore_checkpoint("_energy_checkpoint", None)["params"]'),
    ],
    ids=["template", "no-unreplicate", "indexed"],
)
def test_a_reader_that_takes_it_as_one_copy_keeps_the_finding(tmp_path: Path, reader: str) -> None:
    assert _opx406(tmp_path, {"eval.py": reader}) == [(SAVE_LINE, "OPX406")]


def test_one_bad_reader_among_good_ones_keeps_the_finding(tmp_path: Path) -> None:
    bad = READER.replace('unreplicate(state["params"])', 'state["params"]')
    assert _opx406(tmp_path, {"eval.py": READER, "resume.py": bad}) == [(SAVE_LINE, "OPX406")]


def test_another_directory_is_not_a_reader(tmp_path: Path) -> None:
    other = READER.replace("_energy_checkpoint", "_pretrained_checkpoint")
    assert _opx406(tmp_path, {"eval.py": other}) == [(SAVE_LINE, "OPX406")]
