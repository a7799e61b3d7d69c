"""Flag values from the project's launch scripts (facts/project/launch.py): what a run
of the script gets is what its shell script passes; the flag's default holds only when
nothing passes it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from optax_lint.facts.project.launch import _commands, _flags, literal

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = (ROOT / "fixtures" / "OPX108" / "good_hf_library_training_arguments.py").read_text(encoding="utf-8")


def test_commands_join_continuations_and_skip_comments() -> None:
    text = "#!/bin/bash\n# a comment naming run.py\nexport X=1\npython run.py \\\n  --lr 1e-3 \\\n  --do_train\n"
    assert _commands(text) == [(3, "export X=1"), (4, "python run.py  --lr 1e-3  --do_train")]


@pytest.mark.parametrize(
    "rest, expected",
    [
        (' --weight_decay="0.01" --learning-rate 3e-4 --do_train', {"weight_decay": "0.01", "learning_rate": "3e-4", "do_train": None}),
        (" --lr 1e-3 && python eval.py --lr 5", {"lr": "1e-3"}),  # the next command is not this one's
        (" --steps $STEPS --seed 0 # tuned", {"steps": "$STEPS", "seed": "0"}),
        (' --name "unterminated', {}),  # a broken line says nothing
    ],
)
def test_flags(rest: str, expected: dict) -> None:
    assert _flags(rest) == expected


def test_literal() -> None:
    assert [literal("0.1"), literal("100"), literal("True"), literal("adamw"), literal("$LR"), literal(None)] == [0.1, 100, True, "adamw", None, None]


def _project(tmp_path: Path, launch: str | None, where: str = "training/launch.sh") -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    script = tmp_path / "training" / "run_captions.py"
    script.parent.mkdir()
    script.write_text(SCRIPT, encoding="utf-8")
    if launch is not None:
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text(launch, encoding="utf-8")
    return script


def _opx108(script: Path) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "optax_lint", str(script), "--no-cache", "--select", "OPX108", "--output-format", "json", "--exit-zero"],
        cwd=script.parent.parent, capture_output=True, text=True, timeout=120,
    )
    return json.loads(proc.stdout)


@pytest.mark.parametrize(
    "launch, where, reported",
    [
        (None, "training/launch.sh", False),  # transformers' default: weight_decay 0.0
        ("python run_captions.py \\\n  --weight_decay=0.1 \\\n  --do_train\n", "training/launch.sh", True),
        ("python -m training.run_captions --weight_decay 0.1\n", "scripts/pretrain.sh", True),  # by module, from scripts/
        ("python run_captions.py --weight_decay 0.0\n", "training/launch.sh", False),
        ("python run_captions.py --weight_decay 0.1\npython run_captions.py --weight_decay 0.0\n", "training/launch.sh", True),  # differ: unknown
        ("python run_captions.py --weight_decay $WD\n", "training/launch.sh", True),  # a shell variable: unknown
        ("python other.py --weight_decay 0.1\n", "training/launch.sh", False),  # launches another script
    ],
)
def test_weight_decay_as_the_launch_script_passes_it(tmp_path: Path, launch, where: str, reported: bool) -> None:
    assert bool(_opx108(_project(tmp_path, launch, where))) is reported
