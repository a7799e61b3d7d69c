"""The package and its generators pass pyflakes' checks (ruff's F rules).

An undefined name in a branch no test reached once shipped: OPX301's fix for a decaying
schedule on a Transformer raised NameError, and the finding was lost to an internal
error. These checks see every branch, reached or not.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")


@pytest.mark.skipif(RUFF is None, reason="ruff is a test dependency; not installed here")
def test_package_and_tools_pass_pyflakes() -> None:
    proc = subprocess.run([RUFF, "check", "--isolated", "--select", "F", "--output-format", "concise", "optax_lint", "tools"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
