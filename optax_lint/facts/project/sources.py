"""The config sources one module defines: absl flags (and `config_flags` files),
argparse and click options, dataclass / NamedTuple / flax Module classes with their fields'
defaults, and the ml_collections entries its `get_config()` builds."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Optional

import libcst as cst

from optax_lint.facts.project.files import defines_get_config
from optax_lint.facts.project.found import Found, Origin, weaker
from optax_lint.syntax.names import qualified_name
from optax_lint.syntax.values import Unknown, value_of
from optax_lint.syntax.walker import Scope, walk


@dataclass
class ClassInfo:
    name: str
    scope: Scope
    kind: str  # dataclass | module | namedtuple | plain
    fields: "OrderedDict[str, tuple[Optional[cst.BaseExpression], cst.CSTNode]]"  # name -> (default expr, statement)
    facts: object = None  # the module that defines it
    # `__init__(self, d_model=128, ...)` keyword defaults the method keeps (`self.d_model =
    # d_model`) or hands to its parent (`super().__init__(d_model=d_model)`): a config
    # class built with no arguments holds them. Not class attributes, so not `fields`.
    init_defaults: "OrderedDict[str, tuple[cst.BaseExpression, cst.Param]]" = field(default_factory=OrderedDict)



class ModuleConfig:
    """The config sources one module defines (computed once per module).

    `replay` gives the ml_collections entries its `get_config()` builds: it evaluates
    the config's statements, and evaluation reads configs through this class, so the
    evaluator (evaluate.py) hands it over."""

    def __init__(self, facts, project, replay: Callable[["ModuleConfig"], dict]) -> None:
        self.facts = facts
        self.project = project
        self._replay = replay
        self.flags: dict[str, Found] = {}
        self.config_flags: dict[str, Optional[cst.BaseExpression]] = {}  # flag name -> default (path string or config expr)
        self.flag_holders: dict[str, str] = {}
        self.argparse: dict[str, Found] = {}
        self.click: dict[str, Found] = {}
        self.classes: dict[str, ClassInfo] = {}
        self._ml: Optional[dict[tuple, Found]] = None
        self._ml_busy = False
        self.has_get_config = defines_get_config(facts)
        self._scan()

    # -- flags and argparse (one pass over the calls) ----------------------
    def _scan(self) -> None:
        facts = self.facts
        uses_argparse = any(
            b.kind == "import" and (b.qualname or "").startswith(("argparse", "absl.flags.argparse_flags"))
            for bindings in facts.raw.module_scope.bindings.values()
            for b in bindings
        )
        for record in facts.raw.calls:
            func = record.node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "add_argument":
                if uses_argparse:
                    self._argparse(record)
                continue
            name = facts.callee(record) or ""
            short = name.rsplit(".", 1)[-1]
            if not short.startswith("DEFINE_"):
                continue
            if "config_flags" in name and short in ("DEFINE_config_file", "DEFINE_config_dict", "DEFINE_config_dataclass"):
                flag = _arg(record.node, 0, "name")
                default = _arg(record.node, 1, "default" if short == "DEFINE_config_file" else "config")
                flag_name = value_of(flag, record.scope) if flag is not None else None
                if isinstance(flag_name, str):
                    self.config_flags[flag_name] = default
                    if isinstance(record.assigned_to, cst.Name):
                        self.flag_holders[record.assigned_to.value] = flag_name
                continue
            if not (name.startswith("absl.flags.") or ".flags." in name or name.startswith("flags.")):
                continue
            flag = _arg(record.node, 0, "name")
            flag_name = value_of(flag, record.scope) if flag is not None else None
            if not isinstance(flag_name, str):
                continue
            if isinstance(record.assigned_to, cst.Name):
                self.flag_holders[record.assigned_to.value] = flag_name
            default = _arg(record.node, 1, "default")
            if default is None:
                continue
            # Plain values only here: this runs while the module's config is being built.
            value = value_of(default, record.scope)
            if not isinstance(value, Unknown) and value is not None:
                self.flags[flag_name] = Found(value, "medium", Origin(facts, record.statement), f"default of flag --{flag_name}")
        for scope in facts.raw.scopes:
            if scope.kind == "function" and isinstance(scope.node, cst.FunctionDef) and scope.node.decorators:
                self._click(scope)
            if scope.kind == "class":
                info = _class_info(facts, scope)
                if info is not None and info.name not in self.classes:
                    self.classes[info.name] = info

    def _argparse(self, record) -> None:
        options = []
        dest = None
        default = None
        action = None
        for arg in record.node.args:
            if arg.keyword is None and isinstance(arg.value, cst.SimpleString):
                text = value_of(arg.value, record.scope)
                if isinstance(text, str):
                    options.append(text)
            elif arg.keyword is not None:
                key = arg.keyword.value
                if key == "dest":
                    dest = value_of(arg.value, record.scope)
                elif key == "default":
                    default = arg.value
                elif key == "action":
                    action = value_of(arg.value, record.scope)
        if not isinstance(dest, str):
            longs = [o for o in options if o.startswith("--")]
            shorts = [o for o in options if o.startswith("-") and not o.startswith("--")]
            plain = [o for o in options if not o.startswith("-")]
            chosen = longs[0][2:] if longs else (shorts[0][1:] if shorts else (plain[0] if plain else None))
            dest = chosen.replace("-", "_") if chosen else None
        if not dest:
            return
        if default is not None:
            value = value_of(default, record.scope)
            value = None if isinstance(value, Unknown) else value
            confidence = "medium"
        elif action == "store_true":
            value, confidence = False, "high"
        elif action == "store_false":
            value, confidence = True, "high"
        else:
            return
        if value is None:
            return
        self.argparse[dest] = Found(value, weaker(confidence, "medium"), Origin(self.facts, record.statement), f"default of --{dest.replace('_', '-')}")

    def _click(self, scope: Scope) -> None:
        """`@click.option("--num_layers", default=2)` on a command: the option's default,
        under the parameter name click gives it (an explicit name, else the longest
        option with its dashes made underscores)."""
        for decorator in scope.node.decorators:
            call = decorator.decorator
            if not isinstance(call, cst.Call) or self.facts.canonical(call.func, scope.parent) != "click.option":
                continue
            names = [value_of(a.value, scope.parent) for a in call.args if a.keyword is None]
            names = [n for n in names if isinstance(n, str)]
            plain = [n for n in names if n.isidentifier()]
            options = sorted((n.lstrip("-") for n in names if n.startswith("-")), key=len, reverse=True)
            dest = plain[0] if plain else (options[0].replace("-", "_").lower() if options else None)
            default = _arg(call, 99, "default")
            if not dest or default is None:
                continue
            value = value_of(default, scope.parent)
            if not isinstance(value, Unknown) and value is not None and not callable(value):
                self.click[dest] = Found(value, "medium", Origin(self.facts, scope.node), f"default of --{options[0] if options else dest}")

    # -- ml_collections ----------------------------------------------------
    @property
    def ml(self) -> dict[tuple, Found]:
        if self._ml is None:
            if self._ml_busy:  # a config module importing itself through a cycle
                return {}
            self._ml_busy = True
            try:
                self._ml = self._replay(self) if self.has_get_config else {}
            finally:
                self._ml_busy = False
        return self._ml


def _arg(call: cst.Call, position: int, keyword: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position].value if 0 <= position < len(positional) else None


def _decorator_name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Call):
        node = node.func
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_decorator_name(node.value)}.{node.attr.value}"
    return ""



def _class_info(facts, scope: Scope) -> Optional[ClassInfo]:
    node = scope.node
    if not isinstance(node, cst.ClassDef):
        return None
    kind = "plain"
    for decorator in node.decorators:
        if _decorator_name(decorator.decorator).endswith("dataclass"):
            kind = "dataclass"
    for base in node.bases:
        text = _decorator_name(base.value)
        qual = qualified_name(base.value, scope.parent or scope) or text
        if qual.endswith("NamedTuple"):
            kind = "namedtuple"
        elif qual.endswith("PyTreeNode") or qual.endswith("struct.PyTreeNode"):
            kind = "dataclass"
        elif text.endswith("Module") or qual.endswith(".Module"):
            kind = "module"
    fields: "OrderedDict[str, tuple]" = OrderedDict()
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    for stmt in body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                fields[small.target.value] = (small.value, stmt)
            elif isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                if kind != "plain":
                    fields[small.targets[0].target.value] = (small.value, stmt)
    init_defaults = _init_defaults(body)
    if kind == "plain" and not fields and not init_defaults:
        return None
    return ClassInfo(node.name.value, scope, kind, fields, facts, init_defaults)


def _init_defaults(body) -> "OrderedDict[str, tuple]":
    """The keyword defaults of the class's `__init__` that it stores on `self` under the
    same name or passes on by that keyword (`super().__init__(d_model=d_model)`)."""
    init = next((stmt for stmt in body if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__"), None)
    out: "OrderedDict[str, tuple]" = OrderedDict()
    if init is None:
        return out
    kept: set[str] = set()
    for node in walk(init.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name):
            for target in node.targets:
                t = target.target
                if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self" and t.attr.value == node.value.value:
                    kept.add(node.value.value)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "__init__":
            for arg in node.args:
                if arg.keyword is not None and isinstance(arg.value, cst.Name) and arg.keyword.value == arg.value.value:
                    kept.add(arg.value.value)
    params = init.params
    for param in list(params.params) + list(params.kwonly_params):
        name = param.name.value
        if param.default is not None and name in kept and name != "self":
            out[name] = (param.default, param)
    return out

