"""One cheap pass over a libcst tree that records the raw facts every rule builds on.

libcst's visitor machinery costs about as much as the parse itself; walking the
dataclass fields ourselves, skipping whitespace and punctuation, costs ~0.07x
(measured on optax/flax sources). So this module never uses `CSTVisitor` or any
metadata provider: it records scopes, imports, bindings, calls, attribute reads,
returns and loops, and the higher-level extractors work from these records.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Iterator, Optional

import libcst as cst

# Fields that only hold whitespace, comments or punctuation: never worth descending.
_SKIP_FIELDS = frozenset(
    {
        "whitespace_before", "whitespace_after", "lpar", "rpar", "comma", "semicolon",
        "leading_lines", "header", "footer", "trailing_whitespace", "lines_after_decorators",
        "whitespace_after_func", "whitespace_before_params", "whitespace_after_star",
        "whitespace_after_arg", "whitespace_before_colon", "whitespace_after_colon", "equal",
        "star", "dot", "colon", "whitespace_before_args", "whitespace_after_def",
        "whitespace_after_await", "whitespace_after_name", "whitespace_after_as",
        "whitespace_before_as", "whitespace_after_class", "whitespace_after_import",
        "whitespace_after_from", "whitespace_before_import", "whitespace_after_dot",
        "indent", "lbracket", "rbracket", "lbrace", "rbrace", "operator", "first_line",
        "whitespace_before_indent", "whitespace_after_at", "whitespace_after_lambda",
        "whitespace_after_for", "whitespace_before_in", "whitespace_after_in",
        "whitespace_after_if", "whitespace_before_if", "whitespace_before_else",
        "whitespace_after_else", "whitespace_after_while", "whitespace_before_from",
        "whitespace_after_return", "whitespace_after_global", "whitespace_after_nonlocal",
        "whitespace_after_del", "whitespace_after_assert", "whitespace_after_raise",
        "whitespace_after_with", "whitespace_before_with_items", "whitespace_after_with_items",
        "whitespace_after_try", "whitespace_after_except", "whitespace_after_finally",
        "whitespace_after_yield", "whitespace_after_async", "whitespace_before_expression",
        "whitespace_after_expression", "whitespace_after_match", "whitespace_after_case",
        "whitespace_after_type", "asynchronous", "newline", "keyword",
    }
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(node_type: type) -> tuple[str, ...]:
    """The fields of a node type that may hold child nodes: not whitespace or
    punctuation, and not declared `str` or `Literal[...]` (a Name's or a number's
    value, an Arg's star), so leaves cost one lookup."""
    names = _FIELDS.get(node_type)
    if names is None:
        names = tuple(
            f.name
            for f in dataclasses.fields(node_type)
            if f.name not in _SKIP_FIELDS and f.type is not str and typing.get_origin(f.type) is not typing.Literal
        )
        _FIELDS[node_type] = names
    return names


_IS_NODE: dict[type, bool] = {}  # isinstance on libcst's ABC-based classes is slow: cache per type


def _is_node(value) -> bool:
    kind = type(value)
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = isinstance(value, cst.CSTNode)
    return known


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Children in source order, whitespace and punctuation left out. The hottest
    function of a lint (called once per node by several walks): the two lookups are
    inlined, which makes a walk ~25% faster than calling child_fields and _is_node."""
    kind = type(node)
    names = _FIELDS.get(kind)
    if names is None:
        names = child_fields(kind)
    out: list[cst.CSTNode] = []
    if not names:
        return out
    is_node = _IS_NODE
    for name in names:
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            for item in value:
                known = is_node.get(type(item))
                if known is None:
                    known = _is_node(item)
                if known:
                    out.append(item)
        else:
            known = is_node.get(kind)
            if known is None:
                known = _is_node(value)
            if known:
                out.append(value)
    return out


def iter_children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    return iter(children(node))


def enclosing_function(scope: Optional["Scope"]) -> Optional["Scope"]:
    """The function (or the module) whose body holds `scope`: lambdas, comprehensions
    and classes in between are looked through."""
    while scope is not None and scope.kind not in ("function", "module"):
        scope = scope.parent
    return scope


def inside_scope(scope: Optional["Scope"], outer: "Scope") -> bool:
    """`scope` is `outer` or nested in it."""
    while scope is not None:
        if scope is outer:
            return True
        scope = scope.parent
    return False


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Pre-order, source-order walk of a subtree (without whitespace nodes)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


# ---------------------------------------------------------------------------
# Records


@dataclass(eq=False)
class Scope:
    kind: str  # module | function | class | lambda | comprehension
    node: cst.CSTNode
    name: str
    parent: Optional["Scope"]
    bindings: dict[str, list["Binding"]] = field(default_factory=dict)
    params: dict[str, cst.Param] = field(default_factory=dict)
    returns: list["ReturnRecord"] = field(default_factory=list)
    declared_global: set[str] = field(default_factory=set)

    def enclosing_class(self) -> Optional["Scope"]:
        """The innermost class scope holding this scope (itself, if it is one), or None."""
        scope: Optional[Scope] = self
        while scope is not None and scope.kind != "class":
            scope = scope.parent
        return scope

    def lookup_chain(self) -> Iterator["Scope"]:
        """Scopes searched for a name used here (class bodies are skipped by nested functions)."""
        scope: Optional[Scope] = self
        first = True
        while scope is not None:
            if first or scope.kind != "class":
                yield scope
            first = False
            scope = scope.parent


@dataclass(eq=False)
class Binding:
    name: str
    kind: str  # assign | annassign | augassign | import | def | class | for | with | param | unpack | walrus | del
    scope: Scope
    node: cst.CSTNode  # the statement (or Param / FunctionDef / alias)
    value: Optional[cst.BaseExpression] = None
    index: tuple[int, ...] = ()  # position inside an unpacked target: (a, (b, c)) = v -> c has (1, 1)
    conditional: bool = False  # under if/for/while/try/with inside its scope
    in_loop: bool = False
    qualname: Optional[str] = None  # for imports: what the name refers to
    order: int = -1  # calls recorded before it: orders bindings against calls in source order


@dataclass(eq=False)
class CallRecord:
    node: cst.Call
    scope: Scope
    statement: cst.CSTNode  # the innermost statement holding the call
    parent_call: Optional[cst.Call] = None  # the call whose argument (list) holds this call
    assigned_to: Optional[cst.BaseAssignTargetExpression] = None  # `x = call(...)` target
    is_expression_statement: bool = False  # the call's value is discarded
    loop_depth: int = 0  # for/while loops enclosing the call inside its function
    conditional: bool = False


@dataclass(eq=False)
class AttributeRecord:
    node: cst.Attribute
    scope: Scope
    statement: cst.CSTNode


@dataclass(eq=False)
class ReturnRecord:
    node: cst.Return
    scope: Scope


@dataclass(eq=False)
class LoopRecord:
    node: cst.CSTNode  # For | While
    scope: Scope
    depth: int


@dataclass(eq=False)
class RawFacts:
    module: cst.Module
    module_scope: Scope
    scopes: list[Scope] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    attributes: list[AttributeRecord] = field(default_factory=list)
    loops: list[LoopRecord] = field(default_factory=list)
    functions: dict[cst.FunctionDef, Scope] = field(default_factory=dict)
    statements_of: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)  # call -> statement
    # Child -> parent for statements only (cheap; used to find enclosing blocks for fixes).
    parent_stmt: dict[cst.CSTNode, cst.CSTNode] = field(default_factory=dict)
    comments_present: bool = False
    item_stores: set[tuple[int, str]] = field(default_factory=set)  # (scope id, name) of `name[k] = v`
    attribute_stores: list[tuple[cst.Attribute, cst.BaseExpression, "Scope"]] = field(default_factory=list)  # `a.b = v`

    def statement_inside(self, statement: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
        """`statement` is `ancestor` or sits in its body (a loop, an `if`, a def)."""
        current: Optional[cst.CSTNode] = statement
        while current is not None:
            if current is ancestor:
                return True
            current = self.parent_stmt.get(current)
        return False

    def enclosing_ifs(self, statement: cst.CSTNode, stop: Optional[cst.CSTNode] = None) -> list[tuple[cst.If, bool]]:
        """The `if` statements around `statement`, innermost first, up to `stop` (a
        function's node; by default the nearest def or class), each with whether the
        statement sits in its body (True) or in its `elif`/`else` arm (False). The
        statements of an `else:` block map to the `if` itself (`stmt_orelse`), so the arm
        is told by membership in the body."""
        out = []
        child, current = statement, self.parent_stmt.get(statement)
        while current is not None and current is not stop:
            if stop is None and isinstance(current, (cst.FunctionDef, cst.ClassDef)):
                break
            if isinstance(current, cst.If):
                body = current.body
                out.append((current, isinstance(body, cst.IndentedBlock) and any(s is child for s in body.body)))
            child, current = current, self.parent_stmt.get(current)
        return out


    def reaching_binding(self, bindings: list["Binding"], statement: cst.CSTNode) -> Optional["Binding"]:
        """Of a name's `bindings` (in one scope), the one that certainly holds where
        `statement` reads the name: the nearest binding statement that comes before the
        reading statement, or one of its enclosing statements, in the same block. Nothing
        between them can skip it (`if resume: ckpt = restore(...)`, later `if resume:
        ckpt = dict(model=state)` then `ckpt["model"]` reads the dict). None when no
        binding is known to reach it (one in a branch, or one a loop around the read may
        make on an earlier pass)."""
        at = {id(b.node): b for b in bindings if isinstance(b.node, _REBINDING_KINDS.get(b.kind, ()))}
        if not at:
            return None
        bound = {id(b.node) for b in bindings}
        child, parent = statement, self.parent_stmt.get(statement)
        while child is not None:
            block = _block_of(child, parent if parent is not None else self.module)
            if block is not None:
                for sibling in reversed(block[: _index(block, child)]):
                    if id(sibling) in at:
                        return at[id(sibling)]
                    if not isinstance(sibling, cst.SimpleStatementLine) and _holds_any(sibling, bound):
                        return None  # a branch or a loop in between may have rebound it
            if parent is None or isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
                return None
            if isinstance(parent, (cst.For, cst.While)) and _holds_any(parent, bound):
                return None  # a later pass may read what this pass binds after the read
            child, parent = parent, self.parent_stmt.get(parent)
        return None


# Bindings that replace a name's value outright, by the statement that holds them (an
# augmented assignment keeps the value, a walrus may come after the read in its
# statement, a `for` may not run, and `if x: a = 1` on one line binds under its `if`).
_REBINDING_KINDS = {
    "assign": cst.SimpleStatementLine,
    "annassign": cst.SimpleStatementLine,
    "unpack": cst.SimpleStatementLine,
    "import": cst.SimpleStatementLine,
    "with": cst.With,
    "def": cst.FunctionDef,
    "class": cst.ClassDef,
}


def _holds_any(tree: cst.CSTNode, ids: set[int]) -> bool:
    return any(id(part) in ids for part in walk(tree))


def _index(block, child) -> int:
    return next(i for i, statement in enumerate(block) if statement is child)


def _block_of(child: cst.CSTNode, parent: cst.CSTNode):
    """The statement list of `parent` (a module or compound statement) that holds
    `child`, or None (an `elif` is held by its `if` in no list)."""
    if isinstance(parent, cst.Module):
        lists = [parent.body]
    else:
        lists = []
        pending = [parent]
        while pending:
            node = pending.pop()
            for sub in node.children:
                if isinstance(sub, cst.IndentedBlock):
                    lists.append(sub.body)
                elif isinstance(sub, cst.SimpleStatementSuite):
                    continue  # `if x: a = 1` holds small statements, not statement lines
                elif isinstance(sub, (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally)):
                    pending.append(sub)
    for block in lists:
        if any(statement is child for statement in block):
            return block
    return None


# Attribute names that rules read; recording every attribute would be wasted work.
INTERESTING_ATTRS = frozenset(
    {"hyperparams", "update", "init", "apply_gradients", "opt_state", "params", "replace", "tx", "inner_opt_state", "inner_state"}
)


class _Collector:
    def __init__(self, module: cst.Module) -> None:
        scope = Scope("module", module, "<module>", None)
        self.facts = RawFacts(module=module, module_scope=scope, scopes=[scope])
        self.scope = scope
        self.statement: cst.CSTNode = module
        self.loop_depth = 0
        self.conditional = 0

    # -- statements -------------------------------------------------------
    def block(self, body, parent) -> None:
        for stmt in body:
            self.facts.parent_stmt[stmt] = parent
            self.stmt(stmt)

    def stmt(self, node: cst.CSTNode) -> None:
        previous = self.statement
        self.statement = node
        try:
            if isinstance(node, cst.SimpleStatementLine):
                for small in node.body:
                    self.small(small, node)
            elif isinstance(node, cst.FunctionDef):
                self.function(node)
            elif isinstance(node, cst.ClassDef):
                self.klass(node)
            elif isinstance(node, (cst.For, cst.While)):
                self.loop(node)
            elif isinstance(node, cst.If):
                self.expr(node.test)
                self.conditional += 1
                self.suite(node.body, node)
                if node.orelse is not None:
                    self.stmt_orelse(node.orelse)
                self.conditional -= 1
            elif isinstance(node, cst.With):
                for item in node.items:
                    self.expr(item.item)
                    if item.asname is not None:
                        self.bind_target(item.asname.name, "with", node, item.item)
                self.suite(node.body, node)
            elif isinstance(node, cst.Try) or isinstance(node, getattr(cst, "TryStar", cst.Try)):
                self.conditional += 1
                self.suite(node.body, node)
                for handler in node.handlers:
                    if handler.type is not None:
                        self.expr(handler.type)
                    self.suite(handler.body, node)
                if node.orelse is not None:
                    self.suite(node.orelse.body, node)
                if node.finalbody is not None:
                    self.suite(node.finalbody.body, node)
                self.conditional -= 1
            elif isinstance(node, cst.Match) if hasattr(cst, "Match") else False:
                self.expr(node.subject)
                self.conditional += 1
                for case in node.cases:
                    self.suite(case.body, node)
                self.conditional -= 1
            else:
                # Unknown compound statement: still record the calls inside it.
                for child in iter_children(node):
                    if isinstance(child, cst.BaseSuite):
                        self.suite(child, node)
                    elif isinstance(child, cst.BaseExpression):
                        self.expr(child)
        finally:
            self.statement = previous

    def stmt_orelse(self, orelse) -> None:
        if isinstance(orelse, cst.If):
            self.facts.parent_stmt[orelse] = self.statement
            self.stmt(orelse)
        else:
            self.suite(orelse.body, self.statement)

    def suite(self, suite, parent) -> None:
        if isinstance(suite, cst.IndentedBlock):
            self.block(suite.body, parent)
        elif isinstance(suite, cst.SimpleStatementSuite):
            for small in suite.body:
                self.small(small, parent)
        else:  # pragma: no cover - libcst only has these two
            self.block(getattr(suite, "body", ()), parent)

    def small(self, node: cst.BaseSmallStatement, line) -> None:
        if isinstance(node, cst.Assign):
            self.expr(node.value, assigned=node.targets[0].target if len(node.targets) == 1 else None)
            for target in node.targets:
                self.bind_target(target.target, "assign", line, node.value)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.expr(node.value, assigned=node.target)
                self.bind_target(node.target, "annassign", line, node.value)
        elif isinstance(node, cst.AugAssign):
            self.note_item_store(node.target)
            self.expr(node.value)
            self.expr(node.target)
            if isinstance(node.target, cst.Name):
                self.add_binding(node.target.value, "augassign", line, node.value)
        elif isinstance(node, cst.Expr):
            self.expr(node.value, discarded=True)
        elif isinstance(node, cst.Return):
            self.scope.returns.append(ReturnRecord(node, self.scope))
            if node.value is not None:
                self.expr(node.value)
        elif isinstance(node, cst.Import):
            for alias in node.names:
                dotted = _dotted(alias.name)
                if alias.asname is not None:
                    self.add_binding(_target_name(alias.asname.name), "import", line, None, qualname=dotted)
                else:
                    top = dotted.split(".")[0]
                    self.add_binding(top, "import", line, None, qualname=top)
        elif isinstance(node, cst.ImportFrom):
            base = _dotted(node.module) if node.module is not None else ""
            if node.relative:
                base = "." * len(node.relative) + base
            if isinstance(node.names, cst.ImportStar):
                return
            for alias in node.names:
                name = _dotted(alias.name)
                local = _target_name(alias.asname.name) if alias.asname is not None else name
                qual = f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}"
                self.add_binding(local, "import", line, None, qualname=qual)
        elif isinstance(node, cst.Global):
            for item in node.names:
                self.scope.declared_global.add(item.name.value)
        elif isinstance(node, cst.Del):
            for target in (node.target.elements if isinstance(node.target, cst.Tuple) else ()):
                self.note_item_store(target.value)
            self.note_item_store(node.target)
            self.expr(node.target)
        else:
            for child in iter_children(node):
                if isinstance(child, cst.BaseExpression):
                    self.expr(child)

    def function(self, node: cst.FunctionDef) -> None:
        for decorator in node.decorators:
            self.expr(decorator.decorator)
        for param in _all_params(node.params):
            if param.default is not None:
                self.expr(param.default)
        self.add_binding(node.name.value, "def", node, None)
        scope = Scope("function", node, node.name.value, self.scope)
        for param in _all_params(node.params):
            scope.params[param.name.value] = param
            scope.bindings.setdefault(param.name.value, []).append(
                Binding(param.name.value, "param", scope, param)
            )
        self.facts.scopes.append(scope)
        self.facts.functions[node] = scope
        saved = (self.scope, self.loop_depth, self.conditional)
        self.scope, self.loop_depth, self.conditional = scope, 0, 0
        self.suite(node.body, node)
        self.scope, self.loop_depth, self.conditional = saved

    def klass(self, node: cst.ClassDef) -> None:
        for decorator in node.decorators:
            self.expr(decorator.decorator)
        for arg in node.bases:
            self.expr(arg.value)
        for arg in node.keywords:
            self.expr(arg.value)
        self.add_binding(node.name.value, "class", node, None)
        scope = Scope("class", node, node.name.value, self.scope)
        self.facts.scopes.append(scope)
        saved = (self.scope, self.loop_depth, self.conditional)
        self.scope, self.loop_depth, self.conditional = scope, 0, 0
        self.suite(node.body, node)
        self.scope, self.loop_depth, self.conditional = saved

    def loop(self, node) -> None:
        if isinstance(node, cst.For):
            self.expr(node.iter)
            self.bind_target(node.target, "for", node, node.iter, in_loop=True)
        else:
            self.expr(node.test)
        self.facts.loops.append(LoopRecord(node, self.scope, self.loop_depth))
        self.loop_depth += 1
        self.conditional += 1
        self.suite(node.body, node)
        if node.orelse is not None:
            self.suite(node.orelse.body, node)
        self.conditional -= 1
        self.loop_depth -= 1

    # -- bindings ---------------------------------------------------------
    def add_binding(self, name, kind, node, value, *, index=(), qualname=None, in_loop=False) -> None:
        scope = self.scope
        if name in scope.declared_global:
            scope = self.facts.module_scope
        scope.bindings.setdefault(name, []).append(
            Binding(
                name, kind, scope, node, value, index,
                conditional=self.conditional > 0,
                in_loop=in_loop or self.loop_depth > 0,
                qualname=qualname,
                order=len(self.facts.calls),
            )
        )

    def bind_target(self, target, kind, node, value, *, index=(), in_loop=False) -> None:
        if isinstance(target, cst.Name):
            self.add_binding(target.value, kind if not index else "unpack", node, value, index=index, in_loop=in_loop)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for i, element in enumerate(target.elements):
                inner = element.value
                if isinstance(element, cst.StarredElement):
                    inner = element.value
                self.bind_target(inner, kind, node, value, index=index + (i,), in_loop=in_loop)
        else:
            # Attribute / subscript targets bind no name but may hold calls.
            self.note_item_store(target)
            if isinstance(target, cst.Attribute) and value is not None:
                self.facts.attribute_stores.append((target, value, self.scope))
            self.expr(target)

    def note_item_store(self, target) -> None:
        """`x[k] = v`: the list/dict `x` changes without a new binding."""
        if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            self.facts.item_stores.add((id(self.scope), target.value.value))

    # -- expressions ------------------------------------------------------
    def expr(self, node, *, assigned=None, discarded=False) -> None:
        facts = self.facts
        stack: list[tuple[cst.CSTNode, Optional[cst.Call]]] = [(node, None)]
        first = True
        while stack:
            current, parent_call = stack.pop()
            kind = type(current)  # exact types: isinstance on libcst's ABCs is slow
            if kind is cst.Call:
                facts.calls.append(
                    CallRecord(
                        current, self.scope, self.statement, parent_call,
                        assigned_to=assigned if first else None,
                        is_expression_statement=discarded and first,
                        loop_depth=self.loop_depth,
                        conditional=self.conditional > 0,
                    )
                )
                parent_call = current
            elif kind is cst.Attribute:
                if current.attr.value in INTERESTING_ATTRS:
                    facts.attributes.append(AttributeRecord(current, self.scope, self.statement))
            elif kind is cst.Lambda:
                # Lambda bodies run in their own scope; their calls still matter
                # (a `lambda p: jax.tree.map(...)` label fn), so record them there.
                self.lambda_(current, parent_call)
                first = False
                continue
            elif kind is cst.NamedExpr and isinstance(current.target, cst.Name):
                self.add_binding(current.target.value, "walrus", self.statement, current.value)
            first = False
            for child in reversed(children(current)):
                if type(child) not in _INERT:
                    stack.append((child, parent_call))

    def lambda_(self, node: cst.Lambda, parent_call) -> None:
        scope = Scope("lambda", node, "<lambda>", self.scope)
        for param in _all_params(node.params):
            scope.params[param.name.value] = param
            scope.bindings.setdefault(param.name.value, []).append(Binding(param.name.value, "param", scope, param))
        self.facts.scopes.append(scope)
        saved = self.scope
        self.scope = scope
        self.expr(node.body)
        # Calls inside a lambda are not arguments of the enclosing call in any useful sense.
        self.scope = saved


# Nodes `expr` records nothing about and that have no children worth walking: a
# third of the nodes it would otherwise push and pop.
_INERT = frozenset({cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis})


def _all_params(params: cst.Parameters):
    out = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    if isinstance(params.star_arg, cst.Param):
        out.append(params.star_arg)
    if params.star_kwarg is not None:
        out.append(params.star_kwarg)
    return out


def _dotted(node) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _target_name(node) -> str:
    return node.value if isinstance(node, cst.Name) else _dotted(node)


def collect(module: cst.Module) -> RawFacts:
    collector = _Collector(module)
    collector.block(module.body, module)
    return collector.facts
