"""Settings read from the environment: `int(os.environ.get("NUM_STEPS", "20"))` runs with
its default unless a launch sets the variable, so the default is what a plain launch
uses, at medium confidence, as an argparse default is."""

from __future__ import annotations

from typing import Any

import libcst as cst

from optax_lint.facts.project.found import Found
from optax_lint.syntax.values import Unknown
from optax_lint.syntax.walker import Scope

# Reads of the environment that carry the launch's default.
ENVIRONMENT_READS = frozenset({"os.environ.get", "os.getenv"})


def environment_default(evaluator, call: cst.Call, scope: Scope, depth: int) -> Any:
    """The default of `os.environ.get(KEY, DEFAULT)` / `os.getenv(KEY, default=...)` as
    `evaluator` reads it, capped at medium confidence; Unknown without a default."""
    args = [a for a in call.args if not a.star]
    if len(args) != len(call.args) or not args:
        return Unknown("environment read form")
    key = evaluator.eval(args[0].value, scope, depth) if args[0].keyword is None else None
    default = next((a.value for a in args[1:] if a.keyword is None or a.keyword.value == "default"), None)
    if default is None:
        return Unknown("an environment variable with no default")
    found = evaluator.eval(default, scope, depth)
    if not isinstance(found, Found) or found.value is None:
        return found if isinstance(found, Unknown) else Unknown("no default")
    named = isinstance(key, Found) and isinstance(key.value, str)
    label = f"default of the {key.value} environment variable" if named else "an environment default"
    return found.capped("medium", label)
