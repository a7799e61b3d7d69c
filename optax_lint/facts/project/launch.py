"""The command lines a project's shell scripts run the linted script with.

Hugging Face-style training scripts take every hyperparameter as a flag and are run
from a launch script (`python run_clm.py --weight_decay="0.01" \\ ...`): the value a
run gets is the one the launch script passes, and the flag's default (an argparse
default, a dataclass field, transformers' `TrainingArguments`) only holds when nothing
passes it. This reads the `*.sh` files next to the script, in the folders above it up to
the project's root, and in the root's `scripts/` folder; a command launches the script
when it names its file (`run_clm.py`) or its module (`-m training.run_clm`).

What it cannot see (a variable set elsewhere, a scheduler's job file) makes the value
unknown, never a guess. Read only when a flag's value is asked for.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Optional

from optax_lint.core import readlog

# Bounds: launch scripts are small; a folder of generated job files is not read whole.
_MAX_SCRIPTS = 40
_MAX_BYTES = 64_000
_SEPARATORS = frozenset({"&&", "||", "|", ";", "&", ">", ">>", "2>", "2>&1"})


@dataclass(frozen=True)
class Launch:
    """One command that runs the script: the flags it passes (name with `-` as `_` ->
    the text after it; `None` when the flag is given without a value)."""

    path: str  # the script, relative to the project root
    line: int
    flags: dict


def launches(project) -> list[Launch]:
    """The commands in the project's shell scripts that run `project.file`; cached on
    the project."""
    cached = getattr(project, "_launches", None)
    if cached is not None:
        return cached
    found: list[Launch] = []
    if project.file and project.root:
        base = os.path.basename(project.file)
        stem = os.path.splitext(base)[0]
        names = re.compile(
            r"(?:^|[\s/=\"'])" + re.escape(base) + r"(?=[\s\"';]|$)"
            r"|-m\s+(?:[\w.]+\.)?" + re.escape(stem) + r"(?=[\s\"';]|$)"
        )
        for path in _scripts(project):
            text = project.text_of(path)
            if not text or len(text) > _MAX_BYTES:
                continue
            for line, command in _commands(text):
                match = names.search(command)
                if match is not None:
                    found.append(Launch(os.path.relpath(path, project.root), line, _flags(command[match.end():])))
    project._launches = found
    return found


def _scripts(project) -> list[str]:
    """`*.sh` files in the script's folder, each folder above it up to the root, and the
    root's `scripts/` folder (listings recorded, so a new script invalidates the cache)."""
    folders = []
    here = os.path.dirname(os.path.abspath(project.file))
    root = os.path.abspath(project.root)
    while True:
        folders.append(here)
        if here == root or not here.startswith(root):
            break
        here = os.path.dirname(here)
    folders.append(os.path.join(root, "scripts"))
    out: list[str] = []
    for folder in dict.fromkeys(folders):
        try:
            names = readlog.listdir(folder, project.files.log)
        except OSError:
            continue
        out += [os.path.join(folder, n) for n in names if n.endswith(".sh")]
        if len(out) >= _MAX_SCRIPTS:
            break
    return out[:_MAX_SCRIPTS]


def _commands(text: str) -> list[tuple[int, str]]:
    """(first line, logical line) with `\\` continuations joined and comments dropped."""
    out, pending, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def _flags(rest: str) -> dict:
    try:
        tokens = shlex.split(rest, comments=True)
    except ValueError:
        return {}
    flags: dict = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token in _SEPARATORS:
            break
        if token.startswith("--") and len(token) > 2:
            name, eq, value = token[2:].partition("=")
            key = name.replace("-", "_")
            if eq:
                flags[key] = value
            elif index + 1 < len(tokens) and not tokens[index + 1].startswith("-") and tokens[index + 1] not in _SEPARATORS:
                flags[key] = tokens[index + 1]
                index += 1
            else:
                flags[key] = None
        index += 1
    return flags


def literal(text: Optional[str]):
    """A flag's text as the value argparse or HfArgumentParser would give a number or a
    boolean; None when it is a shell expansion (`$LR`) or absent."""
    if text is None or "$" in text or "`" in text:
        return None
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
