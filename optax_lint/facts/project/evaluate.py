"""Static values with provenance across a project: `config.num_epochs * steps_per_epoch`
followed through names assigned once, parameters' defaults, imported project modules,
and attribute paths on config objects (ml_collections configs, whose `get_config()`
is replayed here, absl flags, argparse options, dataclass fields). Every result
carries a confidence and the place it was written."""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Optional

import libcst as cst

from optax_lint.facts.project.callers import (
    NAMESPACES,
    all_agree,
    called_as,
    namespace_field,
    omitted_by_every_call,
    passed_arguments,
)
from optax_lint.facts.project.environment import ENVIRONMENT_READS, environment_default
from optax_lint.facts.project.files import Project
from optax_lint.facts.project.found import Found, Origin, weaker
from optax_lint.facts.project.launch import launches, literal
from optax_lint.facts.project.library_defaults import library_default
from optax_lint.facts.project.sources import (
    ClassInfo,
    ModuleConfig,
    _arg,
    _decorator_name,
)
from optax_lint.syntax.names import lookup, qualified_name
from optax_lint.syntax.values import (
    LOCAL_NAMES,
    Evaluator,
    Resolver,
    Unknown,
    unpack,
    value_of,
)
from optax_lint.syntax.walker import Binding, Scope

_CONFIG_ROOT = re.compile(
    r"(^|_)(config|cfg|conf|configs|hparams|hps|hp|args|flags|opts|options|settings|params_cfg|train_config|model_config)$",
    re.IGNORECASE,
)


def config_of(facts, project: Project) -> ModuleConfig:
    """The config sources `facts`' module defines, read once (the first reader's project
    serves later ones: one run has one project)."""
    if facts.module_config is None:
        facts.module_config = ModuleConfig(facts, project, _replay_get_config)
    return facts.module_config


def project_value(facts, expr: Optional[cst.BaseExpression], scope: Scope) -> Any:
    """The plain static value of `expr` followed across the project (a parameter's
    default, a config field, a flag's default), or Unknown."""
    if expr is None:
        return Unknown("no expression")
    found = ConfigEvaluator(facts).eval(expr, scope)
    return found.value if isinstance(found, Found) else (found if isinstance(found, Unknown) else Unknown("not a value"))


def _replay_get_config(config: ModuleConfig) -> dict[tuple, Found]:
    facts = config.facts
    fn = next(s for s in facts.raw.functions.values() if s.name == "get_config" and s.parent is facts.raw.module_scope)
    return MlBuilder(config, fn).run()


class MlBuilder:
    """Replays the statements of `get_config()` to the config they build."""

    def __init__(self, module_config: ModuleConfig, fn: Scope) -> None:
        self.mc = module_config
        self.facts = module_config.facts
        self.fn = fn
        self.vars: set[str] = set()
        self.entries: dict[tuple, Found] = {}
        self.evaluator = ConfigEvaluator(self.facts, module_config.project, local_config=self)

    def run(self) -> dict[tuple, Found]:
        body = self.fn.node.body
        if isinstance(body, cst.IndentedBlock):
            self.block(body.body, conditional=False)
        return self.entries

    def block(self, statements, conditional: bool) -> None:
        for stmt in statements:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    self.small(small, stmt, conditional)
            elif isinstance(stmt, cst.With):
                self.block(getattr(stmt.body, "body", ()), conditional)
            elif isinstance(stmt, (cst.If, cst.For, cst.While, cst.Try)):
                self.block(getattr(stmt.body, "body", ()), True)
                orelse = getattr(stmt, "orelse", None)
                while orelse is not None:
                    self.block(getattr(orelse.body, "body", ()), True)
                    orelse = getattr(orelse, "orelse", None) if isinstance(orelse, cst.If) else None

    def small(self, small, stmt, conditional: bool) -> None:
        if isinstance(small, cst.Return) and small.value is not None:
            self.assign_value((), small.value, stmt, conditional, fresh=False)
            return
        if isinstance(small, cst.AnnAssign) and small.value is not None:
            targets = [small.target]
            value = small.value
        elif isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
            value = small.value
        else:
            return
        for target in targets:
            if isinstance(target, cst.Name):
                if self.is_config_value(value):
                    self.vars.add(target.value)
                    self.assign_value((), value, stmt, conditional, fresh=True)
                continue
            path = self.path_of(target)
            if path is not None:
                self.assign_value(path, value, stmt, conditional, fresh=True)

    def is_config_value(self, value) -> bool:
        if isinstance(value, cst.Call):
            name = _decorator_name(value.func)
            return name.endswith("ConfigDict") or name.endswith("get_config") or name.endswith("FrozenConfigDict")
        return False

    def path_of(self, target) -> Optional[tuple]:
        names = []
        node = target
        while isinstance(node, cst.Attribute):
            names.append(node.attr.value)
            node = node.value
        if isinstance(node, cst.Name) and node.value in self.vars and names:
            return tuple(reversed(names))
        return None

    def assign_value(self, path: tuple, value, stmt, conditional: bool, fresh: bool) -> None:
        if isinstance(value, cst.Call):
            name = _decorator_name(value.func)
            if name.endswith("ConfigDict") or name.endswith("FrozenConfigDict"):
                if fresh:
                    self._drop(path)
                inner = _arg(value, 0, "initial_dictionary")
                if inner is not None:
                    self.assign_value(path, inner, stmt, conditional, fresh=False)
                return
            if name.endswith("get_config"):
                self._drop(path)
                for key, found in self.base_config(value).items():
                    self.entries[path + key] = found
                return
            if name == "dict" and not any(a.keyword is None for a in value.args):
                for arg in value.args:
                    if arg.keyword is not None:
                        self.assign_value(path + (arg.keyword.value,), arg.value, stmt, conditional, fresh=True)
                return
        if isinstance(value, cst.Dict):
            for element in value.elements:
                if isinstance(element, cst.DictElement):
                    key = value_of(element.key, self.fn)
                    if isinstance(key, str):
                        self.assign_value(path + (key,), element.value, stmt, conditional, fresh=True)
            return
        if not path:
            return
        found = self.evaluator.eval(value, self.fn)
        if isinstance(found, Found):
            confidence = "low" if conditional else found.confidence
            self.entries[path] = Found(found.value, confidence, Origin(self.facts, stmt), f"config.{'.'.join(path)}")
        else:
            self.entries.pop(path, None)  # unknown now, whatever it was before

    def _drop(self, path: tuple) -> None:
        for key in [k for k in self.entries if k[: len(path)] == path]:
            del self.entries[key]

    def base_config(self, call: cst.Call) -> dict[tuple, Found]:
        """`default.get_config()` in another config module: its entries."""
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            qual = qualified_name(func.value, self.fn)
            if qual:
                found = self.mc.project.module_of(qual, self.facts)
                if found is not None and not found[1]:
                    return dict(config_of(found[0], self.mc.project).ml)
        return {}

    def lookup(self, root: str, names: list[str]) -> Optional[Found]:
        if root not in self.vars:
            return None
        return self.entries.get(tuple(names))


# ---------------------------------------------------------------------------
# Evaluation


# HfArgumentParser methods that return one instance per dataclass, in order.
_HF_PARSES = frozenset({"parse_args_into_dataclasses", "parse_json_file", "parse_yaml_file", "parse_dict"})


def _hf_parse(binding) -> bool:
    value = binding.value
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _HF_PARSES and len(binding.index) == 1


def _split_attribute(expr: cst.BaseExpression) -> tuple[Optional[cst.BaseExpression], list[str]]:
    names = []
    node = expr
    while isinstance(node, cst.Attribute):
        names.append(node.attr.value)
        node = node.value
    names.reverse()
    return node, names


class _ProjectResolver(Resolver):
    """The project's reading of names and expressions: the ConfigEvaluator's own."""

    def name(self, ev: "ConfigEvaluator", name: str, scope: Scope, depth: int):
        return ev.project_name(name, scope, depth)

    def expression(self, ev: "ConfigEvaluator", expr: cst.BaseExpression, scope: Scope, depth: int):
        return ev.project_expression(expr, scope, depth)


_PROJECT = _ProjectResolver()


class ConfigEvaluator(Evaluator):
    """Static values with provenance (each result a Found) in one module of the project;
    Unknown(reason) when the value cannot be known. Names and attribute paths go to the
    project first (parameters' defaults, imports, config objects), then to the names
    assigned once in the module."""

    max_depth = 20

    def __init__(self, facts, project: Optional[Project] = None, local_config: Optional["MlBuilder"] = None) -> None:
        super().__init__((_PROJECT, LOCAL_NAMES))
        self.facts = facts
        self.project = project if project is not None else facts.project
        self.local_config = local_config  # the get_config() being replayed, if any

    # -- results ------------------------------------------------------------------
    def constant(self, value: Any, node: cst.CSTNode) -> Found:
        return Found(value, "high", Origin(self.facts, node))

    def plain(self, result: Found) -> Any:
        return result.value

    def computed(self, value: Any, operands: list[Found], node: cst.CSTNode) -> Found:
        confidence = operands[0].confidence
        for operand in operands[1:]:
            confidence = weaker(confidence, operand.confidence)
        detail = " ".join(o.detail for o in operands if o.detail)
        return Found(value, confidence, _pick_origin(operands), detail)

    def collected(self, value: Any, items: list[Found], node: cst.CSTNode) -> Found:
        confidence = "high"
        for item in items:
            confidence = weaker(confidence, item.confidence)
        return Found(value, confidence, Origin(self.facts, node))

    def bound(self, result: Any, binding: Binding) -> Any:
        if not isinstance(result, Found):
            return result
        value = unpack(result.value, binding)
        if isinstance(value, Unknown):
            return value
        origin = result.origin
        if origin is None or (origin.facts is self.facts and isinstance(origin.node, (cst.Integer, cst.Float))):
            origin = Origin(self.facts, binding.node)
        return Found(value, result.confidence, origin, result.detail or binding.name)

    # -- names --------------------------------------------------------------------
    def project_name(self, word: str, scope: Scope, depth: int):
        """A parameter (the value its callers in this module pass, else its default as a
        low-confidence guess) or an imported project module's value; None for the other
        names."""
        _, bindings = lookup(word, scope)
        if len(bindings) == 1 and bindings[0].kind == "param":
            param = bindings[0].node
            passed = self.passed_by_callers(bindings[0], depth)
            if passed is not None:
                return passed
            if isinstance(param, cst.Param) and param.default is not None:
                parent = bindings[0].scope.parent or bindings[0].scope
                found = self.eval(param.default, parent, depth)
                if isinstance(found, Found):
                    if omitted_by_every_call(self.facts, bindings[0]):
                        # what running this module does, as a passed value is
                        called = called_as(bindings[0].scope)
                        return found.capped("medium", f"default of parameter {word}, which no call of {called}() here passes")
                    return found.capped("low", f"default of parameter {word}")
            return Unknown(f"'{word}' is a parameter")
        if bindings and all(b.kind == "import" for b in bindings) and len({b.qualname for b in bindings}) == 1:
            return self.imported(bindings[0].qualname or "", [], depth)
        return None

    def passed_by_callers(self, binding: Binding, depth: int) -> Optional[Found]:
        """The value every call of the parameter's function in this module passes for it
        (`train_transformer(training_steps=100)` from `main`): what running this module
        does, so medium confidence. None when the function has no such call, a call leaves
        the parameter out or spreads *args/**kwargs, two calls disagree, or it is a method."""
        passed = passed_arguments(self.facts, binding)
        if not passed:
            return None
        found_all = [self.eval(arg.value, scope, depth + 1) for arg, scope in passed]
        return all_agree(found_all, f"passed for {binding.name} by the call of {binding.scope.name}()")

    def passed_path(self, binding: Binding, names: list[str], depth: int) -> Optional[Found]:
        """`args.lr` inside `train(args)`, read on the object every call in this module
        passes (`train(argparse.Namespace(lr=1e-5, ...))`, or a name bound to one)."""
        passed = passed_arguments(self.facts, binding)
        if not passed or depth >= self.max_depth:
            return None
        found_all = [self.path_of_value(arg.value, scope, names, depth + 1) for arg, scope in passed]
        # the value keeps its own provenance (`the default of --lr`): the object only passes through
        return all_agree(found_all, None)

    def project_expression(self, expr: cst.BaseExpression, scope: Scope, depth: int):
        """An attribute path on a config object or a module; why a call or a subscript
        has no value; None for the other expressions."""
        if isinstance(expr, cst.Attribute):
            root, names = _split_attribute(expr)
            if isinstance(root, cst.Name):
                return self.path(root.value, names, scope, depth)
            return Unknown("attribute of an expression")
        if isinstance(expr, cst.Call):
            name = self.facts.canonical(expr.func, scope) or ""
            if name in ("jax.device_count", "jax.local_device_count", "jax.process_count"):
                return Unknown(f"{name}() is known only at run time")
            if name in ENVIRONMENT_READS:
                return environment_default(self, expr, scope, depth)
            return Unknown("value of a call")
        if isinstance(expr, cst.Subscript):
            return self.subscript(expr, scope, depth)
        return None

    def imported(self, qualname: str, names: list[str], depth: int):
        found = self.project.module_of(qualname, self.facts) if self.project else None
        if found is None:
            return Unknown(f"{qualname} is not a project module")
        module, rest = found
        path = rest + names
        if not path:
            return Unknown("a module")
        other = ConfigEvaluator(module, self.project)
        if len(path) >= 2 and path[0] in config_of(module, self.project).classes:
            return other.class_field(config_of(module, self.project).classes[path[0]], path[1:], "medium", depth)
        result = other.name(path[0], module.raw.module_scope, depth)
        if len(path) > 1 or not isinstance(result, Found):
            return Unknown(f"{'.'.join(path)} in {module.display_path}") if not isinstance(result, Found) else Unknown("attribute of a module value")
        return result

    # -- attribute paths on config objects ---------------------------------
    def path(self, root: str, names: list[str], scope: Scope, depth: int):
        if depth > self.max_depth:
            return Unknown("expression too deep")
        if self.local_config is not None:
            found = self.local_config.lookup(root, names)
            if found is not None:
                return found
            if root in self.local_config.vars:
                return Unknown(f"config.{'.'.join(names)} is not set before this point")
        if root == "self" and names:
            return self.fallback(names[0], names[1:])
        owner, bindings = lookup(root, scope)
        if not bindings:
            if root == "FLAGS":
                return self.flag_path(names)
            return self.fallback(root, names)
        if all(b.kind == "import" for b in bindings) and len({b.qualname for b in bindings}) == 1:
            qual = bindings[0].qualname or ""
            if qual.endswith(".FLAGS") or qual == "FLAGS":
                return self.flag_path(names)
            if qual in ("absl.flags", "flags") and names[:1] == ["FLAGS"]:
                return self.flag_path(names[1:])
            return self.imported(qual, names, depth)
        if len(bindings) > 1 and all(_hf_parse(b) for b in bindings):
            # `if json: a, b = parser.parse_json_file(...) else: a, b = parser.parse_args_into_dataclasses()`:
            # the same dataclass either way, whose default holds unless the run sets it.
            found = [self.call_path(b.value, b, names, depth + 1) for b in bindings]
            if all(isinstance(f, Found) for f in found):
                return _agree(found, f"{root}.{'.'.join(names)}")
            return next(f for f in found if not isinstance(f, Found))
        if len(bindings) != 1:
            return self.fallback(root, names) if _CONFIG_ROOT.search(root) else Unknown(f"'{root}' is assigned more than once")
        binding = bindings[0]
        if binding.kind == "param":
            return self.param_path(binding, names, depth)
        if binding.kind not in ("assign", "annassign", "unpack") or binding.value is None:
            return Unknown(f"'{root}' is a {binding.kind}")
        value = binding.value
        if isinstance(value, cst.Call):
            return self.call_path(value, binding, names, depth)
        if isinstance(value, cst.Attribute) and self.facts.canonical(value, binding.scope) == "wandb.config":
            return self.fallback("config", names)  # `config = wandb.config`: the run's options
        if isinstance(value, cst.Attribute):
            inner_root, inner_names = _split_attribute(value)
            if isinstance(inner_root, cst.Name):
                if inner_names == ["value"] and not binding.index:
                    holder = self.flag_holder(inner_root.value)
                    if holder is not None:
                        return self.flag_path([holder] + names)
                return self.path(inner_root.value, inner_names + names, binding.scope, depth + 1)
        if isinstance(value, cst.Name) and not binding.index:
            return self.path(value.value, names, binding.scope, depth + 1)
        if isinstance(value, cst.Dict) and names:
            literal = value_of(value, binding.scope)
            if isinstance(literal, dict):
                return _dig(literal, names, Origin(self.facts, binding.node), "high")
        return Unknown(f"'{root}' is not a config object")

    def call_path(self, call: cst.Call, binding, names: list[str], depth: int):
        func = call.func
        scope = binding.scope
        if len(call.args) == 2 and not binding.index and self.facts.canonical(func, scope) == "typing.cast":
            # `args = cast(Args, parser.parse_args())`: a no-op at run time
            return self.path_of_value(call.args[1].value, scope, names, depth + 1)
        if isinstance(func, cst.Attribute) and func.attr.value in ("parse_args", "parse_known_args"):
            if func.attr.value == "parse_known_args" and binding.index not in ((0,),):
                return Unknown("parse_known_args extras")
            return self.argparse_path(names)
        if isinstance(func, cst.Attribute) and func.attr.value in _HF_PARSES and len(binding.index) == 1:
            return self.hf_dataclass_path(func.value, binding.index[0], scope, names, depth)
        if binding.index:
            return Unknown("unpacked from a call")
        if names and self.facts.canonical(func, scope) in NAMESPACES:
            return namespace_field(self, call, binding, names, depth)
        if isinstance(func, (cst.Name, cst.Attribute)):
            short = func.attr.value if isinstance(func, cst.Attribute) else func.value
            info, confidence = self.class_of(func, scope)
            if info is not None:
                return self.instance_path(info, call, scope, names, depth)
            if short == "get_config":
                module = self.facts
                if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                    qual = qualified_name(func.value, scope)
                    found = self.project.module_of(qual, self.facts) if qual else None
                    if found is None or found[1]:
                        return Unknown("get_config of an unknown module")
                    module = found[0]
                return self.ml_path(names, [module], explicit=True)
        if isinstance(func, cst.Name) and depth < self.max_depth:
            # `args = parse_args()` where parse_args() returns parser.parse_args(): follow
            # a local helper's single returned value.
            _, fn_bindings = lookup(func.value, scope)
            if len(fn_bindings) == 1 and fn_bindings[0].kind == "def":
                fn = self.facts.raw.functions.get(fn_bindings[0].node)
                values = [r.node.value for r in fn.returns if r.node.value is not None] if fn is not None else []
                if len(values) == 1 and isinstance(values[0], (cst.Call, cst.Attribute, cst.Name)):
                    return self.path_of_value(values[0], fn, names, depth + 1)
        return Unknown("value of a call")

    def hf_dataclass_path(self, parser: cst.BaseExpression, index: int, scope: Scope, names: list[str], depth: int):
        """`model_args, data_args, training_args = parser.parse_args_into_dataclasses()`
        with `parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))`:
        the index-th dataclass, its field's default (what a run gets without the flag)."""
        if not isinstance(parser, cst.Name):
            return Unknown("an argument parser that is not a name")
        _, bindings = lookup(parser.value, scope)
        if len(bindings) != 1 or not isinstance(bindings[0].value, cst.Call) or bindings[0].index:
            return Unknown(f"'{parser.value}' is not one HfArgumentParser")
        call = bindings[0].value
        if _split_attribute(call.func)[1][-1:] != ["HfArgumentParser"] and not (isinstance(call.func, cst.Name) and call.func.value == "HfArgumentParser"):
            return Unknown(f"'{parser.value}' is not an HfArgumentParser")
        if not call.args or not isinstance(call.args[0].value, (cst.Tuple, cst.List)):
            return Unknown("HfArgumentParser of a non-literal tuple")
        classes = call.args[0].value.elements
        if index >= len(classes):
            return Unknown("more targets than dataclasses")
        dataclass = classes[index].value
        info, _ = self.class_of(dataclass, bindings[0].scope)
        if info is not None:
            found = ConfigEvaluator(_facts_of(info, self), self.project).class_field(info, names, "medium", depth + 1)
        else:
            # transformers' own TrainingArguments: a flag not passed takes its default
            qual = qualified_name(dataclass, bindings[0].scope) if isinstance(dataclass, (cst.Name, cst.Attribute)) else None
            default = library_default(qual, names[0]) if len(names) == 1 else None
            if default is None:
                found = Unknown("an unknown dataclass")
            else:
                found = Found(default, "medium", Origin(self.facts, dataclass), f"{qual}.{names[0]} default")
        return self.as_launched(names[0], found) if len(names) == 1 else found

    def path_of_value(self, value: cst.BaseExpression, scope: Scope, names: list[str], depth: int):
        """`names` looked up on the object `value` evaluates to (a helper's return value)."""
        if isinstance(value, cst.Name):
            return self.path(value.value, names, scope, depth + 1)
        if isinstance(value, cst.Attribute):
            root, inner = _split_attribute(value)
            if isinstance(root, cst.Name):
                return self.path(root.value, inner + names, scope, depth + 1)
            return Unknown("attribute of an expression")
        if isinstance(value, cst.Call):
            from optax_lint.syntax.walker import Binding

            return self.call_path(value, Binding("<return>", "assign", scope, value, value), names, depth + 1)
        return Unknown("not a config object")

    def param_path(self, binding, names: list[str], depth: int):
        param = binding.node
        root = binding.name
        if isinstance(param, cst.Param) and param.annotation is not None:
            annotation = param.annotation.annotation
            if isinstance(annotation, cst.SimpleString):
                text = value_of(annotation, binding.scope)
                annotation = cst.Name(text.split(".")[-1]) if isinstance(text, str) and text.isidentifier() else annotation
            text = _decorator_name(annotation)
            if text.endswith("ConfigDict") or text.endswith("FrozenConfigDict"):
                return self.ml_path(names, None, explicit=False)
            info, _ = self.class_of(annotation, binding.scope.parent or binding.scope)
            if info is not None:
                return ConfigEvaluator(_facts_of(info, self), self.project).class_field(info, names, "medium", depth)
        if names:
            passed = self.passed_path(binding, names, depth)
            if passed is not None:
                return passed
        if _CONFIG_ROOT.search(root):
            return self.fallback(root, names)
        return Unknown(f"'{root}' is a parameter")

    def fallback(self, root: str, names: list[str]):
        """`config.x` where `config` comes from elsewhere: every config source of the
        project that defines the path; one value -> medium, several -> low."""
        if not names or not _CONFIG_ROOT.search(root):
            return Unknown(f"'{root}' is not a config object")
        candidates: list[Found] = []
        ml = self.ml_path(names, None, explicit=False)
        if isinstance(ml, Found):
            candidates.append(ml)
        if len(names) == 1:
            for mc in self.sources([names[0], names[0].replace("_", "-")]):
                for table in (mc.flags, mc.argparse, mc.click):
                    if names[0] in table:
                        candidates.append(table[names[0]])
                for info in mc.classes.values():
                    if info.kind in ("dataclass", "namedtuple") and names[0] in info.fields:
                        result = ConfigEvaluator(mc.facts, self.project).class_field(info, names, "medium", 0)
                        if isinstance(result, Found):
                            candidates.append(result)
        return _agree(candidates, f"{root}.{'.'.join(names)}")

    def sources(self, need: Iterable[str] = ()) -> list[ModuleConfig]:
        """This module's config sources, and for the linted file those of the project
        modules it imports that mention `need` (the flag or field looked for)."""
        out = [config_of(self.facts, self.project)]
        if self.project is not None and self.facts is self.project.facts:
            out += [config_of(m, self.project) for m in self.project.imported_modules(need)]
        return out

    # -- absl flags ---------------------------------------------------------
    def flag_holder(self, name: str) -> Optional[str]:
        for mc in self.sources([name]):
            if name in mc.flag_holders:
                return mc.flag_holders[name]
        return None

    def flag_path(self, names: list[str]):
        if not names:
            return Unknown("FLAGS")
        for mc in self.sources([names[0]]):
            if names[0] in mc.config_flags:
                default = mc.config_flags[names[0]]
                module = None
                if isinstance(default, cst.SimpleString):
                    path = value_of(default, mc.facts.raw.module_scope)
                    module = self.project.config_path(path) if isinstance(path, str) else None
                elif isinstance(default, cst.Call):
                    name = _decorator_name(default.func)
                    if name.endswith("get_config"):
                        if isinstance(default.func, cst.Attribute) and isinstance(default.func.value, cst.Name):
                            qual = qualified_name(default.func.value, mc.facts.raw.module_scope)
                            found = self.project.module_of(qual, mc.facts) if qual else None
                            module = found[0] if found is not None and not found[1] else None
                        else:
                            module = mc.facts
                if module is not None:
                    return self.ml_path(names[1:], [module], explicit=True)
                return self.ml_path(names[1:], None, explicit=False)
            if names[0] in mc.flags and len(names) == 1:
                return self.as_launched(names[0], mc.flags[names[0]])
        return Unknown(f"flag --{names[0]} is not defined in the project files read")

    def linked_configs(self) -> list:
        """Config files named as the default of a `config_flags.DEFINE_config_file` flag."""
        out = []
        for mc in self.sources(["config_flags"]):
            for default in mc.config_flags.values():
                if isinstance(default, cst.SimpleString):
                    path = value_of(default, mc.facts.raw.module_scope)
                    module = self.project.config_path(path) if isinstance(path, str) and self.project else None
                    if module is not None and module not in out:
                        out.append(module)
        return out

    def argparse_path(self, names: list[str]):
        if len(names) != 1:
            return Unknown("argparse namespaces are flat")
        for mc in self.sources([names[0], names[0].replace("_", "-")]):
            if names[0] in mc.argparse:
                return self.as_launched(names[0], mc.argparse[names[0]])
        return Unknown(f"--{names[0]} is not an argparse option defined in the project files read")

    def as_launched(self, flag: str, default: Any) -> Any:
        """A command-line value: what the project's launch scripts pass for `--flag`
        (facts/project/launch.py), else its default. Scripts that pass different values,
        or a shell variable, make it unknown; a script that leaves it out keeps the
        default among the values."""
        runs = launches(self.project) if self.project is not None else []
        passed = [(run, run.flags[flag]) for run in runs if flag in run.flags]
        if not passed:
            return default
        values = []
        for run, text in passed:
            value = literal(text)
            if value is None:
                return Unknown(f"--{flag} in {run.path}:{run.line} is not a literal")
            values.append(value)
        if len(passed) < len(runs):
            if not isinstance(default, Found):
                return default
            values.append(default.value)
        if any(v != values[0] for v in values):
            shown = ", ".join(sorted({str(v) for v in values}))
            return Unknown(f"the project's launch scripts run it with different --{flag} values ({shown})")
        run, text = passed[0]
        return Found(values[0], "medium", None, f"--{flag}={text} in {run.path}:{run.line}")

    # -- ml_collections -------------------------------------------------------
    def ml_path(self, names: list[str], modules: Optional[list], explicit: bool):
        if not names:
            return Unknown("the whole config")
        key = tuple(names)
        total = len(modules) if modules is not None else 0
        if modules is None:
            linked = self.linked_configs()
            if len(linked) == 1:
                modules, explicit, total = linked, True, 1
        if modules is None:
            # Every config module of the project counts for agreement; only those whose
            # text may set the key are parsed.
            own = config_of(self.facts, self.project).has_get_config
            paths = self.project.config_paths() if self.project is not None else []
            modules = self.project.config_modules([names[-1]]) if self.project is not None else []
            if own and self.facts not in modules:
                modules = [self.facts] + list(modules)
            total = len(paths) + (1 if own else 0)
        hits: list[tuple[object, Found]] = []
        for module in modules:
            entries = config_of(module, self.project).ml
            if key in entries:
                hits.append((module, entries[key]))
        if not hits:
            return Unknown(f"config.{'.'.join(names)} is not set in the configs read")
        if explicit or total == 1:
            module, found = hits[0]
            return found.capped("medium", f"{found.detail} in {module.display_path}")
        values = {repr(f.value) for _, f in hits}
        if len(values) == 1 and len(hits) == total:
            module, found = hits[0]
            where = module.path if len(hits) == 1 else f"{len(hits)} config files"
            return found.capped("medium", f"{found.detail} in {where}")
        preferred = next((h for h in hits if os.path.basename(h[0].path) in ("default.py", "base.py", "config.py")), hits[0])
        others = ", ".join(f"{os.path.basename(m.path)}: {f.value!r}" for m, f in hits if m is not preferred[0])
        missing = total - len(hits)
        why = f"configs disagree ({others})" if others else f"set in {len(hits)} of {total} configs"
        if others and missing:
            why += f"; unset in {missing}"
        return preferred[1].capped("low", f"{preferred[1].detail} in {preferred[0].display_path}; {why}")

    # -- dataclasses ------------------------------------------------------------
    def class_of(self, expr: cst.BaseExpression, scope: Scope) -> tuple[Optional[ClassInfo], str]:
        """The config class a callee or annotation names (in this file or a project module)."""
        mc = config_of(self.facts, self.project)
        if isinstance(expr, cst.Name):
            _, bindings = lookup(expr.value, scope)
            if len(bindings) == 1 and bindings[0].kind == "class" and expr.value in mc.classes:
                return mc.classes[expr.value], "high"
            if bindings and all(b.kind == "import" for b in bindings):
                qual = bindings[0].qualname or ""
                found = self.project.module_of(qual, self.facts) if self.project else None
                if found is not None and len(found[1]) == 1:
                    other = config_of(found[0], self.project)
                    info = other.classes.get(found[1][0])
                    if info is not None:
                        return info, "medium"
        elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            qual = qualified_name(expr, scope)
            if qual:
                found = self.project.module_of(qual, self.facts) if self.project else None
                if found is not None and len(found[1]) == 1:
                    info = config_of(found[0], self.project).classes.get(found[1][0])
                    if info is not None:
                        return info, "medium"
        return None, ""

    def instance_path(self, info: ClassInfo, call: cst.Call, scope: Scope, names: list[str], depth: int):
        if not names or info.kind == "plain":
            return Unknown("not a config field")
        field_name = names[0]
        if any(a.star for a in call.args):
            return Unknown(f"{info.name}(...) with * arguments")
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == field_name:
                found = self.eval(arg.value, scope, depth)
                if isinstance(found, Found) and len(names) > 1:
                    return Unknown("nested override")
                return found
        positional = [a for a in call.args if a.keyword is None]
        order = list(info.fields)
        if field_name in order and order.index(field_name) < len(positional):
            found = self.eval(positional[order.index(field_name)].value, scope, depth)
            return found if len(names) == 1 else Unknown("nested override")
        owner = ConfigEvaluator(_facts_of(info, self), self.project)
        return owner.class_field(info, names, "high", depth)

    def class_field(self, info: ClassInfo, names: list[str], cap: str, depth: int):
        if not names or names[0] not in info.fields:
            return Unknown(f"{info.name} has no field {names[0] if names else ''}")
        default, stmt = info.fields[names[0]]
        if default is None:
            return Unknown(f"{info.name}.{names[0]} has no default")
        if isinstance(default, cst.Call) and _decorator_name(default.func).split(".")[-1] == "field":
            plain = _arg(default, -1, "default")
            factory = _arg(default, -1, "default_factory")
            if plain is not None:
                default = plain
            elif factory is not None and len(names) > 1:
                nested, _ = self.class_of(factory, info.scope.parent or info.scope)
                if nested is not None:
                    return ConfigEvaluator(_facts_of(nested, self), self.project).class_field(nested, names[1:], cap, depth + 1)
                return Unknown("default_factory")
            else:
                return Unknown("default_factory")
        if len(names) > 1:
            if isinstance(default, cst.Call):
                nested, _ = self.class_of(default.func, info.scope.parent or info.scope)
                if nested is not None:
                    return ConfigEvaluator(_facts_of(nested, self), self.project).instance_path(nested, default, info.scope, names[1:], depth + 1)
            return Unknown("nested field")
        found = self.eval(default, info.scope, depth)
        if not isinstance(found, Found):
            return found
        return Found(found.value, weaker(found.confidence, cap), Origin(_facts_of(info, self), stmt), f"{info.name}.{names[0]} default")

    # -- subscripts ---------------------------------------------------------------
    def subscript(self, expr: cst.Subscript, scope: Scope, depth: int):
        if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
            return Unknown("slice")
        base = self.eval(expr.value, scope, depth)
        if not isinstance(base, Found):
            return base
        key = self.eval(expr.slice[0].slice.value, scope, depth)
        if not isinstance(key, Found):
            return key
        try:
            value = base.value[key.value]
        except (KeyError, IndexError, TypeError):
            return Unknown("subscript")
        return Found(value, weaker(base.confidence, key.confidence), base.origin, base.detail)


def _facts_of(info: ClassInfo, evaluator: ConfigEvaluator):
    return info.facts if info.facts is not None else evaluator.facts


def _pick_origin(operands: list[Found]) -> Optional[Origin]:
    """Where a computed value was written: the first operand not written as a bare number."""
    for found in operands:
        if found.origin is not None and not isinstance(found.origin.node, (cst.Integer, cst.Float)):
            return found.origin
    return next((found.origin for found in operands if found.origin is not None), None)


def _dig(value: Any, names: list[str], origin: Origin, confidence: str):
    for name in names:
        if isinstance(value, dict) and name in value:
            value = value[name]
        else:
            return Unknown(f"no key {name}")
    return Found(value, confidence, origin, "")


def _agree(candidates: list[Found], label: str):
    if not candidates:
        return Unknown(f"{label} is not defined in the project files read")
    values = {repr(c.value) for c in candidates}
    first = candidates[0]
    if len(values) == 1:
        return first.capped("medium", first.detail or label)
    shown = ", ".join(sorted(values))
    return first.capped("low", f"{first.detail or label}; sources disagree ({shown})")