"""Weight-decay masks and partition labels: where a pipeline takes one, and what the
mask function computes, compiled into `mask_expr`'s predicate language.

The compiler follows what real mask functions are made of: `flatten_dict` +
a dict comprehension + `unflatten_dict`, `path_aware_map`, `tree_map_with_path`,
`tree_map(lambda x: x.ndim > 1, ...)`, local helper functions and lambdas passed
around (`traverse(lambda path, _: decay_path(path))`), `freeze`. It inlines them
symbolically; anything else (a loop, a call into another module, an f-string) makes
the mask "not interpretable" with the reason, and the rules stay silent on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

import libcst as cst

from optax_lint.facts.masks import expr as mx
from optax_lint.facts.pipelines.build import Pipeline, TxNode
from optax_lint.syntax.names import lookup, qualified_name
from optax_lint.syntax.nodes import is_none, node_code
from optax_lint.syntax.values import Unknown, single_binding, value_of
from optax_lint.syntax.walker import Scope

TREE_MAP = frozenset({"jax.tree_util.tree_map", "jax.tree.map", "jax.tree_map"})
TREE_MAP_WITH_PATH = frozenset({"jax.tree_util.tree_map_with_path", "jax.tree.map_with_path"})
PATH_AWARE_MAP = frozenset({"flax.traverse_util.path_aware_map"})
FLATTEN = frozenset({"flax.traverse_util.flatten_dict"})
UNFLATTEN = frozenset({"flax.traverse_util.unflatten_dict"})
FREEZE = frozenset({"flax.core.freeze", "flax.core.frozen_dict.freeze", "flax.core.FrozenDict", "flax.core.frozen_dict.FrozenDict"})
UNFREEZE = frozenset({"flax.core.unfreeze", "flax.core.frozen_dict.unfreeze"})
KEYSTR = frozenset({"jax.tree_util.keystr"})
# jnp.ndim(x) / np.shape(x): the same as the attribute of the leaf
ARRAY_FUNCS = {"jax.numpy.ndim": "ndim", "numpy.ndim": "ndim", "jax.numpy.shape": "shape", "numpy.shape": "shape", "jax.numpy.size": "size", "numpy.size": "size"}

# Optax parameters that take a weight-decay mask, and the wrappers' tree arguments.
DECAY_MASK_PARAMS = ("mask", "weight_decay_mask")
_MAX_DEPTH = 40

_CMP_OPS = {
    cst.Equal: "==", cst.NotEqual: "!=", cst.LessThan: "<", cst.LessThanEqual: "<=",
    cst.GreaterThan: ">", cst.GreaterThanEqual: ">=", cst.In: "in", cst.NotIn: "not in",
    cst.Is: "is", cst.IsNot: "is not",
}


class NotInterpretable(Exception):
    def __init__(self, reason: str, node: Optional[cst.CSTNode] = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.node = node


# -- symbolic values --------------------------------------------------------


@dataclass
class _Params:
    frozen: bool = False


@dataclass
class _Flat:  # flatten_dict(params): iterating gives the keys
    kind: str


@dataclass
class _FlatItems:  # flat.items()
    kind: str


@dataclass
class _FlatMask:  # {k: pred for k in flat}
    pred: list
    kind: str


@dataclass
class _Closure:
    params: list[str]
    node: Union[cst.Lambda, cst.FunctionDef]
    scope: Scope
    env: dict


@dataclass
class _Expr:  # a value computed per leaf (or a constant)
    ast: list


@dataclass
class _Tree:  # a mask / label tree over the params
    pred: list
    kind: Optional[str]
    frozen: bool = False


@dataclass
class MaskFunction:
    """A mask (or label) function, compiled: `pred` evaluated per leaf gives the mask
    value (True = the transformation applies) or the label."""

    pred: list
    path_kind: Optional[str]  # mask_expr.NAMES / KEYS / "joined:<sep>" / None (no path)
    is_callable: bool  # passed as a function (optax calls it with the params)
    frozen: bool  # the tree is built as a FrozenDict
    atoms: list[tuple[list, cst.CSTNode]] = field(default_factory=list)  # string comparisons, with their source

    @property
    def uses_path(self) -> bool:
        return mx.uses(self.pred, "path")

    @property
    def uses_leaf(self) -> bool:
        return mx.uses(self.pred, "leaf")

    def value(self, names: tuple[str, ...], shape: tuple[int, ...], key_type=mx.DictKey) -> Any:
        env = {"path": mx.path_value(names, self.path_kind, key_type), "leaf": mx.Leaf(shape)}
        return mx.evaluate(self.pred, env)


class MaskCompiler:
    def __init__(self, facts) -> None:
        self.facts = facts
        self.kind: Optional[str] = None
        self.atoms: list[tuple[list, cst.CSTNode]] = []
        self._atom_nodes: set[int] = set()

    def compile(self, expr: cst.BaseExpression, scope: Scope) -> MaskFunction:
        """Compile a mask argument (a function, or a tree computed from the params)."""
        value = self._eval(expr, scope, {}, 0)
        is_callable = isinstance(value, _Closure)
        if is_callable:
            value = self._apply(value, [_Params()], expr, 0)
        if not isinstance(value, _Tree):
            raise NotInterpretable("the mask is not built from the params tree in a form optax-lint reads", expr)
        return MaskFunction(value.pred, value.kind, is_callable, value.frozen, list(self.atoms))

    # -- expressions ------------------------------------------------------
    def _eval(self, node: cst.CSTNode, scope: Scope, env: dict, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise NotInterpretable("mask function too deep", node)
        d = depth + 1
        if isinstance(node, cst.Name):
            return self._name(node, scope, env, d)
        if isinstance(node, cst.Lambda):
            return _Closure([p.name.value for p in node.params.params], node, scope, dict(env))
        if isinstance(node, cst.Call):
            return self._call(node, scope, env, d)
        if isinstance(node, cst.DictComp):
            return self._dict_comp(node, scope, env, d)
        if isinstance(node, (cst.ListComp, cst.SetComp)):
            return self._constant_comp(node, scope, env, d)
        if isinstance(node, cst.Comparison):
            return self._compare(node, scope, env, d)
        if isinstance(node, cst.BooleanOperation):
            parts = [self._expr(node.left, scope, env, d), self._expr(node.right, scope, env, d)]
            op = "and" if isinstance(node.operator, cst.And) else "or"
            flat: list = []
            for part in parts:
                flat.extend(part[1] if part[0] == op else [part])
            return _Expr([op, flat])
        if isinstance(node, cst.UnaryOperation):
            if isinstance(node.operator, cst.Not):
                return _Expr(["not", self._expr(node.expression, scope, env, d)])
        if isinstance(node, cst.IfExp):
            return _Expr(["ifexp", self._expr(node.test, scope, env, d), self._expr(node.body, scope, env, d), self._expr(node.orelse, scope, env, d)])
        if isinstance(node, cst.Subscript):
            return self._subscript(node, scope, env, d)
        if isinstance(node, cst.Attribute):
            base = self._eval(node.value, scope, env, d)
            if isinstance(base, _Expr) and node.attr.value in mx.ATTRS:
                return _Expr(["attr", base.ast, node.attr.value])
            raise NotInterpretable(f"attribute .{node.attr.value}", node)
        if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            items = []
            for element in node.elements:
                if isinstance(element, cst.StarredElement):
                    raise NotInterpretable("starred element", node)
                items.append(self._expr(element.value, scope, env, d))
            if all(i[0] == "const" for i in items):
                return _Expr(["const", [i[1] for i in items]])
            return _Expr(["tuple", items])
        value = value_of(node, scope) if isinstance(node, cst.BaseExpression) else Unknown("")
        if isinstance(value, Unknown) or not isinstance(value, (str, int, float, bool, type(None), tuple, list)):
            raise NotInterpretable(f"{type(node).__name__} in a mask function", node)
        return _Expr(["const", list(value) if isinstance(value, tuple) else value])

    def _expr(self, node: cst.CSTNode, scope: Scope, env: dict, depth: int) -> list:
        value = self._eval(node, scope, env, depth)
        if not isinstance(value, _Expr):
            raise NotInterpretable("a per-leaf value was expected", node)
        return value.ast

    def _name(self, node: cst.Name, scope: Scope, env: dict, depth: int) -> Any:
        name = node.value
        if name in env:
            return env[name]
        if name in ("True", "False", "None"):
            return _Expr(["const", {"True": True, "False": False, "None": None}[name]])
        _, bindings = lookup(name, scope)
        if len(bindings) == 1 and bindings[0].kind == "def":
            fn = bindings[0].node
            return _Closure([p.name.value for p in fn.params.params], fn, self.facts.raw.functions.get(fn, scope), {})
        binding, reason = single_binding(name, scope)
        if binding is None or binding.index:
            raise NotInterpretable(reason or f"'{name}' is unpacked", node)
        return self._eval(binding.value, binding.scope, {}, depth)

    def _compare(self, node: cst.Comparison, scope: Scope, env: dict, depth: int) -> _Expr:
        left = self._expr(node.left, scope, env, depth)
        parts = []
        for target in node.comparisons:
            op = _CMP_OPS.get(type(target.operator))
            if op is None:
                raise NotInterpretable("comparison operator", node)
            right = self._expr(target.comparator, scope, env, depth)
            parts.append(["cmp", op, left, right])
            left = right
        result = parts[0] if len(parts) == 1 else ["and", parts]
        self._atom(result, node)
        return _Expr(result)

    def _atom(self, ast: list, node: cst.CSTNode) -> None:
        """Remember a comparison with a string, to point at it when it never matches."""
        if id(node) in self._atom_nodes:
            return
        if mx.string_literals(ast) and (mx.uses(ast, "path") or mx.uses(ast, "var")):
            self._atom_nodes.add(id(node))
            self.atoms.append((ast, node))

    def _subscript(self, node: cst.Subscript, scope: Scope, env: dict, depth: int) -> _Expr:
        base = self._expr(node.value, scope, env, depth)
        if len(node.slice) != 1:
            raise NotInterpretable("multi-dimensional subscript", node)
        element = node.slice[0].slice
        if isinstance(element, cst.Index):
            index = value_of(element.value, scope)
            if not isinstance(index, int) or isinstance(index, bool):
                raise NotInterpretable("subscript by a non-literal", node)
            return _Expr(["index", base, index])
        if isinstance(element, cst.Slice) and element.step is None:
            bounds = [None if b is None else value_of(b, scope) for b in (element.lower, element.upper)]
            if any(b is not None and (not isinstance(b, int) or isinstance(b, bool)) for b in bounds):
                raise NotInterpretable("slice by non-literals", node)
            return _Expr(["slice", base, bounds[0], bounds[1]])
        raise NotInterpretable("subscript form", node)

    def _dict_comp(self, node: cst.DictComp, scope: Scope, env: dict, depth: int) -> _FlatMask:
        comp = node.for_in
        if comp.inner_for_in is not None or comp.ifs:
            raise NotInterpretable("nested or filtered comprehension", node)
        source = self._eval(comp.iter, scope, env, depth)
        inner = dict(env)
        if isinstance(source, _Flat) and isinstance(comp.target, cst.Name):
            key_name = comp.target.value
            inner[key_name] = self._path(source.kind)
        elif isinstance(source, _FlatItems) and isinstance(comp.target, cst.Tuple) and len(comp.target.elements) == 2:
            k, v = (e.value for e in comp.target.elements)
            if not (isinstance(k, cst.Name) and isinstance(v, cst.Name)):
                raise NotInterpretable("comprehension target", node)
            key_name = k.value
            inner[key_name] = self._path(source.kind)
            inner[v.value] = _Expr(["leaf"])
        else:
            raise NotInterpretable("a comprehension over something other than flatten_dict(params)", node)
        if not (isinstance(node.key, cst.Name) and node.key.value == key_name):
            raise NotInterpretable("the comprehension rewrites the keys", node)
        return _FlatMask(self._expr(node.value, scope, inner, depth), source.kind)

    def _constant_comp(self, node, scope: Scope, env: dict, depth: int) -> _Expr:
        """[(name, "scale") for name in ["ln_1", "ln_2"]]: a constant list built once."""
        comp = node.for_in
        if comp.inner_for_in is not None or comp.ifs or not isinstance(comp.target, cst.Name):
            raise NotInterpretable("comprehension form", node)
        iterable = self._expr(comp.iter, scope, env, depth)
        if iterable[0] != "const" or not isinstance(iterable[1], list):
            raise NotInterpretable("a comprehension over something other than a constant list", node)
        var = comp.target.value
        items = []
        for item in iterable[1][:256]:
            value = self._expr(node.elt, scope, {**env, var: _Expr(["const", item])}, depth)
            if value[0] != "const":
                try:
                    value = ["const", _as_const(mx.evaluate(value, {}))]
                except (mx.EvalError, TypeError):
                    raise NotInterpretable("a comprehension whose items are not constant", node) from None
            items.append(value[1])
        return _Expr(["const", items])

    def _path(self, kind: str) -> _Expr:
        if self.kind is not None and self.kind != kind:
            raise NotInterpretable("the mask reads paths of two kinds")
        self.kind = kind
        return _Expr(["path"])

    # -- calls --------------------------------------------------------------
    def _call(self, node: cst.Call, scope: Scope, env: dict, depth: int) -> Any:
        func = node.func
        positional = [a for a in node.args if a.keyword is None]
        if any(a.star for a in node.args):
            raise NotInterpretable("*arguments", node)
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        # A method of a per-leaf value: k.endswith("bias"), "/".join(path), flat.items()
        if isinstance(func, cst.Attribute) and qualified_name(func, scope) is None:
            base = self._eval(func.value, scope, env, depth)
            method = func.attr.value
            if isinstance(base, _Flat) and method in ("items", "keys") and not node.args:
                return _FlatItems(base.kind) if method == "items" else base
            if isinstance(base, _Expr) and method in mx.STR_METHODS and not keywords:
                args = [self._expr(a.value, scope, env, depth) for a in positional]
                result = ["method", base.ast, method, args]
                self._atom(result, node)
                return _Expr(result)
            if isinstance(base, _Closure):
                raise NotInterpretable("method of a function", node)
            raise NotInterpretable(f".{method}() in a mask function", node)
        callee = None
        if isinstance(func, cst.Name) and (func.value in env or lookup(func.value, scope)[1]):
            if func.value in env or not qualified_name(func, scope):
                callee = self._eval(func, scope, env, depth)
        elif isinstance(func, (cst.Call, cst.Lambda)):
            callee = self._eval(func, scope, env, depth)
        if isinstance(callee, _Closure):
            args = [self._eval(a.value, scope, env, depth) for a in positional]
            return self._apply(callee, args, node, depth, {k: self._eval(v, scope, env, depth) for k, v in keywords.items()})
        if callee is not None:
            raise NotInterpretable("call of a non-function", node)
        qual = qualified_name(func, scope)
        if qual is not None:
            return self._library_call(qual, node, positional, keywords, scope, env, depth)
        if isinstance(func, cst.Name) and func.value in mx.CALLS and not keywords and len(positional) == 1:
            arg = positional[0].value
            if func.value in ("any", "all") and isinstance(arg, cst.GeneratorExp):
                return _Expr(self._generator(func.value, arg, scope, env, depth))
            return _Expr(["call", func.value, [self._expr(arg, scope, env, depth)]])
        raise NotInterpretable(f"call to {node_code(func)[:40]}", node)

    def _generator(self, kind: str, gen: cst.GeneratorExp, scope: Scope, env: dict, depth: int) -> list:
        comp = gen.for_in
        if comp.inner_for_in is not None or comp.ifs or not isinstance(comp.target, cst.Name):
            raise NotInterpretable("generator form", gen)
        iterable = self._expr(comp.iter, scope, env, depth)
        var = comp.target.value
        body = self._expr(gen.elt, scope, {**env, var: _Expr(["var", var])}, depth)
        result = ["gen", kind, var, iterable, body]
        self._atom(result, gen)
        return result

    def _library_call(self, qual, node, positional, keywords, scope, env, depth) -> Any:
        args = [a.value for a in positional]
        if qual in TREE_MAP | TREE_MAP_WITH_PATH | PATH_AWARE_MAP:
            if len(args) != 2 or keywords:
                raise NotInterpretable(f"{qual.rsplit('.', 1)[-1]} over several trees", node)
            fn = self._eval(args[0], scope, env, depth)
            tree = self._tree(args[1], scope, env, depth)
            if not isinstance(fn, _Closure) or not isinstance(tree, _Params):
                raise NotInterpretable("the mapped function or tree is not followed", node)
            if qual in TREE_MAP:
                value = self._apply(fn, [_Expr(["leaf"])], node, depth)
                kind = None
            else:
                kind = mx.KEYS if qual in TREE_MAP_WITH_PATH else mx.NAMES
                value = self._apply(fn, [self._path(kind), _Expr(["leaf"])], node, depth)
            if not isinstance(value, _Expr):
                raise NotInterpretable("the mapped function does not return a per-leaf value", node)
            return _Tree(value.ast, kind or self.kind, tree.frozen)
        if qual in FLATTEN:
            tree = self._tree(args[0], scope, env, depth) if args else None
            if not isinstance(tree, _Params) or len(args) != 1 or set(keywords) - {"sep"}:
                raise NotInterpretable("flatten_dict of something other than the params", node)
            sep = value_of(keywords["sep"], scope) if "sep" in keywords else None
            if sep is not None and not isinstance(sep, str):
                raise NotInterpretable("flatten_dict with an unknown sep", node)
            return _Flat(mx.NAMES if sep is None else f"joined:{sep}")
        if qual in UNFLATTEN:
            flat = self._eval(args[0], scope, env, depth) if len(args) == 1 else None
            if not isinstance(flat, _FlatMask):
                raise NotInterpretable("unflatten_dict of something optax-lint did not follow", node)
            return _Tree(flat.pred, flat.kind)
        if qual in FREEZE | UNFREEZE:
            inner = self._eval(args[0], scope, env, depth) if len(args) == 1 else None
            frozen = qual in FREEZE
            if isinstance(inner, _Tree):
                return _Tree(inner.pred, inner.kind, frozen)
            if isinstance(inner, _Params):
                return _Params(frozen)
            raise NotInterpretable("freeze of an unknown value", node)
        if qual in ARRAY_FUNCS and len(args) == 1 and not keywords:
            return _Expr(["attr", self._expr(args[0], scope, env, depth), ARRAY_FUNCS[qual]])
        if qual in KEYSTR and len(args) == 1 and not keywords:
            return _Expr(["call", "keystr", [self._expr(args[0], scope, env, depth)]])
        raise NotInterpretable(f"call to {qual}", node)

    def _tree(self, node, scope: Scope, env: dict, depth: int) -> Any:
        """The tree a mask is mapped over. Outside a mask function (a mask tree built
        once, `mask=tree_map(f, self.params)`) a name or attribute is taken to be the
        params: what matters is the function mapped over it."""
        try:
            return self._eval(node, scope, env, depth)
        except NotInterpretable:
            if isinstance(node, (cst.Name, cst.Attribute)) and not env:
                return _Params()
            raise

    def _apply(self, closure: _Closure, args: list, node, depth: int, keywords: Optional[dict] = None) -> Any:
        if depth > _MAX_DEPTH:
            raise NotInterpretable("mask function too deep", node)
        params = closure.node.params
        if params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or params.star_kwarg is not None or params.kwonly_params:
            raise NotInterpretable("a mask function with *args or keyword-only parameters", closure.node)
        names = closure.params
        keywords = keywords or {}
        if len(args) > len(names):
            raise NotInterpretable(f"{len(args)} arguments for {len(names)} parameters", node)
        env = dict(closure.env)
        for name, value in zip(names, args):
            env[name] = value
        for param in params.params[len(args):]:
            if param.name.value in keywords:
                env[param.name.value] = keywords[param.name.value]
            elif param.default is not None:
                env[param.name.value] = self._eval(param.default, closure.scope.parent or closure.scope, {}, depth + 1)
            else:
                raise NotInterpretable(f"missing argument '{param.name.value}'", node)
        if isinstance(closure.node, cst.Lambda):
            return self._eval(closure.node.body, closure.scope, env, depth + 1)
        return self._run_body(closure, env, depth + 1)

    def _run_body(self, closure: _Closure, env: dict, depth: int) -> Any:
        fn = closure.node
        assert isinstance(fn, cst.FunctionDef)
        body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else fn.body.body
        scope = self.facts.raw.functions.get(fn, closure.scope)
        for statement in body:
            if isinstance(statement, cst.FunctionDef):
                env[statement.name.value] = _Closure(
                    [p.name.value for p in statement.params.params], statement, self.facts.raw.functions.get(statement, scope), env
                )
                continue
            if not isinstance(statement, cst.SimpleStatementLine):
                raise NotInterpretable(f"a {type(statement).__name__} statement in {fn.name.value}()", statement)
            for small in statement.body:
                if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                    continue  # docstring
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                    env[small.targets[0].target.value] = self._eval(small.value, scope, env, depth)
                    continue
                if isinstance(small, cst.Return) and small.value is not None:
                    return self._eval(small.value, scope, env, depth)
                raise NotInterpretable(f"a {type(small).__name__} statement in {fn.name.value}()", small)
        raise NotInterpretable(f"{fn.name.value}() returns nothing optax-lint follows", fn)


def _as_const(value):
    if isinstance(value, tuple):
        return [_as_const(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(type(value).__name__)


# -- where pipelines take masks and labels ------------------------------------


@dataclass(eq=False)
class MaskSite:
    """A mask or label tree a pipeline receives.

    kind: "decay" (True = weight decay applies), "labels" (multi_transform labels),
    or "mask" (a `masked` wrapper around something other than a decay)."""

    kind: str
    owner: TxNode  # the alias, add_decayed_weights, masked or multi_transform node
    expr: cst.BaseExpression
    scope: Scope
    pipeline: Pipeline
    _compiled: Any = None

    def function(self, facts) -> Optional[MaskFunction]:
        """The compiled mask function, or None when it is not interpretable."""
        if self._compiled is None:
            try:
                self._compiled = MaskCompiler(facts).compile(self.expr, self.scope)
            except NotInterpretable as exc:
                self._compiled = exc
        return self._compiled if isinstance(self._compiled, MaskFunction) else None

    def role(self) -> str:
        """decay (True = decayed), no_decay (True = the zero-decay optimizer of a
        masked pair), labels, or mask."""
        if self.kind == "mask" and self.owner.children:
            inner = self.owner.children[0]
            if inner.kind == "alias" and decay_mask_param(inner) is not None and inner.args is not None and decays(inner) is False:
                return "no_decay"
        return self.kind

    def why_not(self) -> str:
        return self._compiled.reason if isinstance(self._compiled, NotInterpretable) else ""


def decays(node: TxNode) -> Optional[bool]:
    """Whether a transformation applies a non-zero weight decay (None: unknown)."""
    from optax_lint.facts.pipelines.build import expand

    found: Optional[bool] = False
    for sequence in expand(node):
        for step in sequence:
            if step.primitive != "add_decayed_weights":
                continue
            value = step.arg_value("weight_decay")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if value != 0:
                    return True
            else:
                found = None
    return found


# The parameter that holds an optimizer's decoupled weight decay (adafactor: `_rate`).
_DECAY_PARAMS = ("weight_decay", "weight_decay_rate")


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def decay_in_project(facts, node: TxNode) -> Optional[bool]:
    """`decays(node)`, with an unknown weight_decay argument followed across the project
    (`config.weight_decay` set to 0.0 in the config module, a flag's default, a
    parameter's default): False when that value is statically zero."""
    found = decays(node)
    if found is not None or node.args is None:
        return found
    from optax_lint.facts.project.evaluate import project_value

    expr = next((e for e in (node.args.expr(p) for p in _DECAY_PARAMS) if e is not None), None)
    value = _number(project_value(facts, expr, node.scope))
    return None if value is None else value != 0


def decay_value(facts, node: TxNode) -> Optional[float]:
    """The weight decay `node` applies: the argument as written or followed across the
    project, or the optimizer's own default when none is passed; None when unknown (a
    schedule, a value known only at run time)."""
    if node.entry is None or node.args is None or node.args.has_star:
        return None
    from optax_lint.facts.project.evaluate import project_value

    param = next((p for p in _DECAY_PARAMS if p in node.entry.params), None)
    if param is None:
        return None
    expr = node.args.expr(param)
    return _number(node.entry.defaults.get(param) if expr is None else project_value(facts, expr, node.scope))


def decay_mask_param(node: TxNode) -> Optional[str]:
    """The mask parameter of an optimizer or add_decayed_weights that decays weights."""
    if node.entry is None or node.kind not in ("alias", "transform"):
        return None
    if not any(s.step == "add_decayed_weights" for s in node.entry.expansion) and node.key != "add_decayed_weights":
        return None
    return next((p for p in DECAY_MASK_PARAMS if p in node.entry.params), None)



def collect_mask_sites(facts) -> list[MaskSite]:
    out: list[MaskSite] = []
    seen: set[int] = set()
    for pipeline in facts.pipelines:
        for node in pipeline.nodes():
            if node.args is None or node.call is None:
                continue
            expr, kind = None, None
            param = decay_mask_param(node)
            if param is not None:
                expr, kind = node.args.expr(param), "decay"
            elif node.short == "masked":
                expr = node.args.expr("mask")
                inner = node.children[0] if node.children else None
                kind = "decay" if inner is not None and decays(inner) is not False else "mask"
            elif node.short in ("multi_transform", "partition"):
                expr, kind = node.args.expr("param_labels"), "labels"
            if expr is None or kind is None or id(expr) in seen:
                continue
            if is_none(expr):
                continue
            seen.add(id(expr))
            out.append(MaskSite(kind, node, expr, node.scope, pipeline))
    return out


def literal_tree(expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Optional[cst.CSTNode]:
    """The dict literal or dict comprehension a labels/mask argument is (through
    names assigned once), or None."""
    if depth > 8:
        return None
    if isinstance(expr, (cst.Dict, cst.DictComp)):
        return expr
    if isinstance(expr, cst.Name):
        binding, _ = single_binding(expr.value, scope)
        if binding is not None and not binding.index:
            return literal_tree(binding.value, binding.scope, depth + 1)
    return None
