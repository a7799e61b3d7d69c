"""OPX501 and what a plain load reads (facts/checkpoints/files.py `reads_data`): a
pickled dataset read before training is no resume, so params-only snapshots next to it
stay exports; a load that could be a checkpoint keeps them checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

from optax_lint.engine import lint as engine

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "OPX501" / "good_offline_rl_pickled_dataset_snapshots.py"
TEXT = FIXTURE.read_text(encoding="utf-8")
LOAD = '''    with open(args.dataset_path, "rb") as f:
        trajectories = pickle.load(f)
'''


def _saves(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1) if "save_params(" in line and "import" not in line]


def _opx501(text: str) -> list[int]:
    run = engine.lint_text(text, str(FIXTURE), {"OPX501"})
    return [f.span.line for f in run.findings if f.code == "OPX501"]


def test_fixture_reads_only_its_dataset() -> None:
    assert LOAD in TEXT and len(_saves(TEXT)) == 2
    assert _opx501(TEXT) == []


@pytest.mark.parametrize(
    "load",
    [
        # the file could be a checkpoint: the path says so
        LOAD.replace("args.dataset_path", "args.resume_path"),
        # the result is named like params
        LOAD.replace("trajectories = pickle.load(f)", "trajectories = params = pickle.load(f)"),
        # nothing says data
        LOAD.replace("args.dataset_path", "args.path").replace("trajectories = pickle.load(f)", "trajectories = blob = pickle.load(f)"),
    ],
    ids=["resume-path", "params-name", "no-data-word"],
)
def test_a_load_that_may_be_a_checkpoint_is_a_resume(load: str) -> None:
    text = TEXT.replace(LOAD, load)
    if "blob" in load:
        text = text.replace("trajectories = blob = pickle.load(f)", "blob = pickle.load(f)\n        trajectories = blob")
    assert _opx501(text) == _saves(text)
