"""Turn an extracted pipeline into a *spec*: plain JSON data naming whitelisted optax
constructors and literal arguments. The verification worker builds the chain from the
spec alone; the user's file is never executed, imported, compiled or evaluated.

Anything that is not a whitelisted optax call or a static value (a user function, an
attribute of a user object, `__import__(...)`, `open(...)`) makes the pipeline "not
verifiable", with the reason and the node where the trail stopped. A setting read from
argparse, absl flags or a config module is a static value too: its declared or default
value is substituted and listed in `assumed` (verify/assumed.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

import libcst as cst

from optax_lint.core.optax_api import OptaxApi
from optax_lint.facts.module import ModuleFacts
from optax_lint.syntax.nodes import node_code
from optax_lint.syntax.values import Unknown, single_binding, value_of
from optax_lint.syntax.walker import Scope
from optax_lint.verify.assumed import Assumption, AssumedValues

# Kinds of optax callables the worker may construct.
ALLOWED_KINDS = ("alias", "transform", "wrapper", "schedule")
_MAX_DEPTH = 24


@dataclass(frozen=True)
class NotVerifiable(Exception):
    reason: str
    node: Optional[cst.CSTNode] = None


Spec = Union[dict, list]


class SpecBuilder:
    def __init__(self, facts: ModuleFacts) -> None:
        self.facts = facts
        self.api: OptaxApi = facts.api
        self.settings = AssumedValues(facts)

    @property
    def assumed(self) -> list[Assumption]:
        """The settings assumed by the last build()."""
        return self.settings.assumed

    def build(self, expr: cst.BaseExpression, scope: Scope) -> Spec:
        """The spec of `expr`, or raise NotVerifiable."""
        self.settings.assumed = []
        return self._expr(expr, scope, 0)

    def value(self, expr: cst.BaseExpression, scope: Scope) -> Any:
        """The static value of `expr`, with settings assumed, or Unknown."""
        value = value_of(expr, scope)
        return self.settings.value(expr, scope) if isinstance(value, Unknown) else value

    # -- expressions ------------------------------------------------------
    def _expr(self, expr: cst.BaseExpression, scope: Scope, depth: int) -> Spec:
        if depth > _MAX_DEPTH:
            raise NotVerifiable("expression too deep", expr)
        d = depth + 1
        if isinstance(expr, cst.Call):
            return self._call(expr, scope, d)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = self._api_key(expr, scope)
            if key is not None:
                return {"fn": key}
            if isinstance(expr, cst.Name) and expr.value not in ("True", "False", "None"):
                binding, reason = single_binding(expr.value, scope)
                if binding is None:
                    value = self.value(expr, scope)
                    if isinstance(value, Unknown):
                        raise NotVerifiable(f"'{expr.value}': {reason}", expr)
                    return _literal(value, expr)
                if binding.index:
                    return _literal(value_of(expr, scope), expr)
                return self._expr(binding.value, binding.scope, d)
        if isinstance(expr, (cst.List, cst.Tuple)):
            if any(isinstance(e, cst.StarredElement) for e in expr.elements):
                raise NotVerifiable("starred element", expr)
            items = [self._expr(e.value, scope, d) for e in expr.elements]
            return {"list" if isinstance(expr, cst.List) else "tuple": items}
        if isinstance(expr, cst.Dict):
            pairs = []
            for element in expr.elements:
                if not isinstance(element, cst.DictElement):
                    raise NotVerifiable("dict unpacking", expr)
                pairs.append([self._expr(element.key, scope, d), self._expr(element.value, scope, d)])
            return {"dict": pairs}
        value = value_of(expr, scope)
        if isinstance(value, Unknown):
            assumed = self.settings.value(expr, scope)
            if isinstance(assumed, Unknown):
                raise NotVerifiable(f"not a static value ({value.reason})", expr)
            value = assumed
        return _literal(value, expr)

    def _api_key(self, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
        entry = self.api.entry(self.facts.canonical(expr, scope))
        if entry is not None and entry.kind in ALLOWED_KINDS:
            return entry.key
        return None

    def _call(self, call: cst.Call, scope: Scope, depth: int) -> Spec:
        func = call.func
        # MultiSteps(...).gradient_transformation()
        if isinstance(func, cst.Attribute) and func.attr.value == "gradient_transformation" and isinstance(func.value, cst.Call):
            if call.args:
                raise NotVerifiable("gradient_transformation() with arguments", call)
            return {"method": "gradient_transformation", "of": self._call(func.value, scope, depth + 1)}
        if isinstance(func, cst.Call):  # inject_hyperparams(optax.adamw)(...)
            outer = self._call(func, scope, depth + 1)
            if outer.get("call") not in ("inject_hyperparams",):
                raise NotVerifiable("call of a call result that is not inject_hyperparams(...)", call)
            args, kwargs = self._arguments(call, scope, depth)
            return {**outer, "then": {"args": args, "kwargs": kwargs}}
        key = self._api_key(func, scope)
        if key is None:
            value = self.value(call, scope)  # min(2000 * NUM_DEVICES, 2500): a static value, not a call to run
            if not isinstance(value, Unknown):
                return _literal(value, call)
            name = node_code(func)
            raise NotVerifiable(f"{name[:60]}(...) is not a whitelisted optax constructor", call)
        args, kwargs = self._arguments(call, scope, depth)
        return {"call": key, "args": args, "kwargs": kwargs}

    def _arguments(self, call: cst.Call, scope: Scope, depth: int) -> tuple[list, dict]:
        args: list = []
        kwargs: dict = {}
        for arg in call.args:
            if arg.star == "*":
                if isinstance(arg.value, cst.Name) and self._mutated(arg.value.value, scope):
                    raise NotVerifiable(f"'{arg.value.value}' is built with append/extend", arg)
                value = self._expr(arg.value, scope, depth + 1)
                if not isinstance(value, dict) or not ({"list", "tuple"} & value.keys()):
                    raise NotVerifiable("*arguments that are not a literal list", arg)
                args.extend(value.get("list", value.get("tuple")))
            elif arg.star == "**":
                raise NotVerifiable("**arguments", arg)
            elif arg.keyword is not None:
                kwargs[arg.keyword.value] = self._expr(arg.value, scope, depth + 1)
            else:
                args.append(self._expr(arg.value, scope, depth + 1))
        return args, kwargs


    def _mutated(self, name: str, scope: Scope) -> bool:
        return any(
            isinstance(r.node.func, cst.Attribute) and isinstance(r.node.func.value, cst.Name)
            and r.node.func.value.value == name and r.node.func.attr.value in ("append", "extend", "insert")
            for r in self.facts.raw.calls
        )


def _literal(value: Any, node: cst.CSTNode) -> Spec:
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"lit": value}
    if isinstance(value, (list, tuple)):
        return {"list" if isinstance(value, list) else "tuple": [_literal(v, node) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[_literal(k, node), _literal(v, node)] for k, v in value.items()]}
    raise NotVerifiable(f"unsupported value {type(value).__name__}", node)
