"""Generated documentation stays in sync with the catalogue."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_rule_table_and_rules_doc_are_current() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_docs.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_readme_documents_both_setup_commands_and_the_ci_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ".venv/bin/pip install . && .venv/bin/optax-lint examples/train_transformer.py" in readme
    assert ".venv/bin/pip install -e '.[test,verify]' && .venv/bin/python -m pytest -q" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "-m pytest -q" in ci and "'.[test,verify]'" in ci
