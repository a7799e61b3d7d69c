"""Values `--verify` and `schedule` assume where the code reads a setting: the declared
run context first, then the default of an argparse option or an absl flag, then the
value a config module's `get_config()` sets (read across files, facts/project/).

Nothing is run: the project evaluator reads the defaults as written. Each assumed value
is reported with where it comes from, since the run may well override it. Only
attribute paths on config objects (`args.lr`, `FLAGS.lr`, `config.lr`) and constants
of project modules (`from settings import LR`) are assumed; any other unknown value
keeps the verifier's "not verifiable" with its reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from optax_lint.facts.context.run_context import ALIASES, FIELDS
from optax_lint.facts.project.evaluate import ConfigEvaluator
from optax_lint.facts.project.found import Found
from optax_lint.syntax.nodes import node_code
from optax_lint.syntax.values import Unknown
from optax_lint.syntax.walker import Scope


@dataclass(frozen=True)
class Assumption:
    name: str  # as the code reads it: "args.learning_rate"
    value: Any
    source: str  # "the default of --learning_rate at train.py:13"

    def __str__(self) -> str:
        return f"{self.name} = {self.value!r}, {self.source}"


class _Recording(ConfigEvaluator):
    """The project evaluator, noting each setting it reads: attribute paths, imported constants."""

    def __init__(self, facts) -> None:
        super().__init__(facts, facts.project)
        self.seen: list[tuple[str, Found]] = []  # (as the code reads it, its value)

    def project_expression(self, expr: cst.BaseExpression, scope: Scope, depth: int):
        result = super().project_expression(expr, scope, depth)
        if isinstance(expr, cst.Attribute) and isinstance(result, Found):
            self.seen.append((node_code(expr), result))
        return result

    def imported(self, qualname: str, names: list[str], depth: int):
        """A constant of a project module (`from settings import LR`)."""
        result = super().imported(qualname, names, depth)
        if isinstance(result, Found) and not names:
            self.seen.append((qualname.rsplit(".", 1)[-1], result))
        return result


class AssumedValues:
    """The assumed values of one module's expressions; `assumed` lists those used so far."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self.assumed: list[Assumption] = []

    def value(self, expr: cst.BaseExpression, scope: Scope) -> Any:
        """The value of `expr` with settings assumed, or Unknown(reason)."""
        declared = self._declared(expr)
        if declared is not None:
            return declared
        evaluator = _Recording(self.facts)
        try:
            found = evaluator.eval(expr, scope)
        except Exception as exc:  # a reading the evaluator trips on is only "not known"
            return Unknown(f"could not be read ({type(exc).__name__})")
        if isinstance(found, Unknown):
            return found
        if not evaluator.seen:
            return Unknown("not a static value")
        for name, leaf in evaluator.seen:
            if leaf.confidence == "low":
                return Unknown(f"{name}: {leaf.detail or 'only a guess'}")
        for name, leaf in evaluator.seen:
            self._note(Assumption(name, leaf.value, _source(leaf)))
        return found.value

    def _declared(self, expr: cst.BaseExpression) -> Optional[Any]:
        """`args.num_train_steps` when the run context declares `steps`."""
        if not isinstance(expr, cst.Attribute):
            return None
        word = expr.attr.value.lower()
        field = ALIASES.get(word, word)
        if field not in FIELDS or field in ("arch", "fine_tune"):
            return None
        entry = self.facts.run_context.values.get(field)  # declared values only: no inference
        if entry is None or not entry.declared or not isinstance(entry.value, (int, float)):
            return None
        self._note(Assumption(node_code(expr), entry.value, f"{field} {entry.where()}"))
        return entry.value

    def _note(self, assumption: Assumption) -> None:
        if assumption not in self.assumed:
            self.assumed.append(assumption)


def _source(found: Found) -> str:
    where = found.origin.location() if found.origin is not None else ""
    at = f" at {where}" if where else ""
    detail = found.detail or ""
    if detail.startswith("default of --") and found.origin is not None:
        # the option as the script spells it (`--learning_rate`), not argparse's dest
        spelled = re.search(r"[\"'](--[\w-]+)[\"']", node_code(found.origin.node))
        detail = f"default of {spelled.group(1)}" if spelled else detail
    if detail.startswith("default of"):
        return f"the {detail}{at}"
    if detail.startswith("config."):
        return f"set by get_config(){at}"
    return f"defined{at}"
