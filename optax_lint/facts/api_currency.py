"""API currency facts (OPX701-OPX704): where a module spells a removed, deprecated or
private optax/flax/jax path, and where it uses the pre-0.11 `nnx.Optimizer` API.

The table is `rules/api_currency.toml` (generated from the installed libraries by
`tools/gen_api_currency.py`), merged with optax's module-`__getattr__` deprecations
from `rules/optax_api.toml` ([deprecated]); nothing is imported on the lint path.

Matching is by *resolved* dotted path, never by text: `jax.device_put_replicated`
is reported only where `jax` is the imported jax module, and `'_device_put_sharded'`
in a string is no reference at all. A reference is reported where the old path is
spelled: the import alias (`from jax.experimental.shard_map import shard_map`) or the
attribute chain (`jax.device_put_replicated`), never again at every use of a local
name bound by a reported import.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Iterator, Optional

import libcst as cst

from optax_lint.core.catalogue import load_table
from optax_lint.core.optax_api import OptaxApi
from optax_lint.facts.file_role import owning_package
from optax_lint.syntax.arguments import call_arg_expr, param_arg
from optax_lint.syntax.names import lookup, qualified_name
from optax_lint.syntax.walker import Binding, CallRecord, Scope, iter_children, walk

_VERSION = re.compile(
    r"(?:v|version |deprecated in v?|removed in (?:optax )?|since (?:Flax )?|as of (?:Flax )?|"
    r"\.\. deprecated:: )(\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)
_PARTIAL = frozenset({"functools.partial"})

# The text prefilter's pieces (CurrencyTable.may_be_mentioned). Each pattern starts
# with a literal; `_word_starts` adds the leading `\b` by looking at the character before.
_AFTER_DOT = re.compile(r"\.(\w+)")
_WORDS = re.compile(r"\w+")
_WORD_CHAR = re.compile(r"\w")
_IMPORT = re.compile(r"import\b")
_PAREN = re.compile(r"\s*\(")
_PRIVATE_SPELLINGS = (
    re.compile(r"optax(?:\.\w+)*\._\w"),
    re.compile(r"from\s+optax(?:\.\w+)*\s+import\s*\(?[^\n]*\b_\w"),
)


def _words_until(text: str, start: int, stop: str) -> list[str]:
    """The words of `text` from `start` to the next `stop` (or to the end)."""
    end = text.find(stop, start)
    return _WORDS.findall(text, start, len(text) if end < 0 else end)


def _word_starts(text: str, pattern: "re.Pattern[str]") -> Iterator["re.Match[str]"]:
    """The matches of `pattern` that begin a word, as `\b` + pattern would find them."""
    pos = 0
    while True:
        match = pattern.search(text, pos)
        if match is None:
            return
        start = match.start()
        if start == 0 or not _WORD_CHAR.match(text, start - 1):
            yield match
        pos = start + 1


# --- the table -----------------------------------------------------------------------

@dataclass(frozen=True)
class CallRecipe:
    """How a call of the old name becomes an equivalent call of the replacement."""

    params: tuple[str, ...]  # old parameter names, in order
    positional: int  # leading arguments that stay positional
    keywords: tuple[str, ...] = ()  # old parameters that may be passed by keyword
    rename: dict = field(default_factory=dict)  # old keyword -> new keyword
    add: dict = field(default_factory=dict)  # keywords added when absent


@dataclass(frozen=True)
class Entry:
    path: str
    rule: str
    kind: str  # name | module
    status: str  # removed | deprecated
    trigger: str  # access | import | call | doc
    observed: str
    since: str
    replacement: str
    hint: str
    fix: str  # rename | call | none
    call: Optional[CallRecipe]
    evidence: str

    @property
    def library(self) -> str:
        return self.path.split(".", 1)[0]


@dataclass(frozen=True)
class ArgumentEntry:
    callable: str  # canonical name, e.g. optax.add_noise
    rule: str
    rename: dict
    observed: str
    since: str


@dataclass(frozen=True)
class PrivateTarget:
    public: str  # public dotted path of the same object
    removed_module: str  # "" or the observed ModuleNotFoundError of a vanished module
    missing_name: bool = False  # the module exists but no longer defines the name


def _recipe(raw: Optional[dict]) -> Optional[CallRecipe]:
    if not raw:
        return None
    return CallRecipe(tuple(raw.get("params", ())), int(raw.get("positional", 0)),
                      tuple(raw.get("keywords", ())), dict(raw.get("rename", {})), dict(raw.get("add", {})))


class CurrencyTable:
    def __init__(self, table: dict, optax_api_table: dict, api: OptaxApi) -> None:
        self.versions: dict[str, str] = dict(table.get("versions", {}))
        self.api = api
        self.entries: dict[str, Entry] = {}
        supplements = {}
        for path, raw in table.get("names", {}).items():
            if raw.get("source") == "optax_api":
                supplements[path] = raw
                continue
            self.entries[path] = Entry(
                path, raw["rule"], raw.get("kind", "name"), raw["status"], raw.get("trigger", "access"),
                raw.get("observed", ""), raw.get("since", ""), raw.get("replacement", ""),
                raw.get("hint", ""), raw.get("fix", "none"), _recipe(raw.get("call")), raw.get("evidence", ""))
        # optax's own module-__getattr__ deprecations, kept in optax_api.toml.
        for key, raw in optax_api_table.get("deprecated", {}).items():
            path = f"optax.{key}"
            removed = bool(raw.get("removed"))
            message = raw.get("message", "")
            same_as = raw.get("same_as", "")
            extra = supplements.get(path, {})
            self.entries[path] = Entry(
                path, "OPX701", "name", "removed" if removed else "deprecated", "access",
                f"{'AttributeError' if removed else 'DeprecationWarning'}: {message}",
                ", ".join(dict.fromkeys(_VERSION.findall(message))),
                extra.get("replacement") or (f"optax.{same_as}" if same_as else ""), "",
                extra.get("fix") or ("rename" if same_as else "none"), _recipe(extra.get("call")),
                extra.get("evidence") or ("the same object (optax_api.toml same_as)" if same_as else ""))
        self.arguments: dict[str, ArgumentEntry] = {
            path: ArgumentEntry(path, raw["rule"], dict(raw["rename"]), raw.get("observed", ""), raw.get("since", ""))
            for path, raw in table.get("arguments", {}).items()
        }
        self.nnx: dict = dict(table.get("nnx_optimizer", {}))
        self.private: dict[str, str] = dict(table.get("private", {}))
        self.removed_private_modules: dict[str, str] = dict(table.get("removed_private_modules", {}))
        self.private_names: dict[str, frozenset[str]] = {
            module: frozenset(names) for module, names in table.get("private_names", {}).items()}
        # Leaf -> its public spelling, from the identity-checked [private] rows (these
        # also cover the typing aliases, OptState, Params, that optax_api.toml leaves out).
        homes: dict[str, set[str]] = {}
        for public in self.private.values():
            homes.setdefault(public.rsplit(".", 1)[1], set()).add(public)
        self.public_leaf: dict[str, str] = {leaf: next(iter(p)) for leaf, p in homes.items() if len(p) == 1}
        self.leaves = frozenset(p.rsplit(".", 1)[-1] for p in self.entries)

    def may_be_mentioned(self, text: str) -> bool:
        """The text prefilter: a table path is spelled as `.leaf` or in an import
        statement (on its line, or in its parentheses); a private optax path as
        `optax(.x)*._y` or `from optax(.x)* import _y`. Written as scans for literals
        (a pattern that starts with a literal is searched for fast, one that starts with
        `\\b` or an alternation is tried at every position: 15x slower on real files)."""
        leaves = self.leaves
        if not leaves.isdisjoint(_AFTER_DOT.findall(text)):
            return True
        for match in _word_starts(text, _IMPORT):
            if not leaves.isdisjoint(_words_until(text, match.end(), "\n")):
                return True
            paren = _PAREN.match(text, match.end())
            if paren is not None and not leaves.isdisjoint(_words_until(text, paren.end(), ")")):
                return True
        return any(next(_word_starts(text, pattern), None) is not None for pattern in _PRIVATE_SPELLINGS)

    # -- lookups ------------------------------------------------------------------
    def lookup(self, qualname: str) -> Optional[Entry]:
        """The entry for `qualname` or its longest prefix."""
        path = qualname
        while True:
            entry = self.entries.get(path)
            if entry is not None:
                return entry
            if "." not in path:
                return None
            path = path.rsplit(".", 1)[0]

    def private_target(self, qualname: str) -> Optional[PrivateTarget]:
        """The public path of a private optax path (`optax._src.alias.adamw`)."""
        if not qualname.startswith("optax.") or not any(p.startswith("_") for p in qualname.split(".")[1:]):
            return None
        public = self.private.get(qualname)
        if public is not None:
            return PrivateTarget(public, "")
        module, _, leaf = qualname.rpartition(".")
        observed = self.removed_private_modules.get(module)
        if observed is not None:
            public = self._public_by_leaf(leaf)
            if public is not None:
                return PrivateTarget(public, observed)
        defined = self.private_names.get(module)
        if defined is not None and leaf not in defined:
            # The module is still there but the name moved (OptState went to base).
            public = self._public_by_leaf(leaf) or self.public_leaf.get(leaf)
            if public is not None:
                return PrivateTarget(public, "", missing_name=True)
        return None

    def _public_by_leaf(self, leaf: str) -> Optional[str]:
        if leaf in self.api.entries:
            return f"optax.{leaf}"
        matches = [k for k in self.api.entries if k.rsplit(".", 1)[-1] == leaf]
        return f"optax.{matches[0]}" if len(matches) == 1 else None

    def version_of(self, path: str) -> str:
        library = path.split(".", 1)[0]
        name = "orbax-checkpoint" if library == "orbax" else library
        version = self.versions.get(name, "")
        return f"{library} {version}" if version else library


@functools.lru_cache(maxsize=1)
def load_currency_table(api: OptaxApi) -> CurrencyTable:
    return CurrencyTable(load_table("api_currency"), load_table("optax_api"), api)


# --- references ------------------------------------------------------------------------

@dataclass(eq=False)
class NameUse:
    """A use of a name bound by a reported import."""

    node: cst.Name
    scope: Scope
    call: Optional[cst.Call] = None  # the node is this call's callee
    partial: Optional[cst.Call] = None  # the node is the first argument of functools.partial(...)


@dataclass(eq=False)
class Reference:
    kind: str  # attribute | import_from | import
    node: cst.CSTNode  # the Attribute, or the ImportAlias
    qualname: str  # the path spelled here, resolved through the imports
    scope: Scope
    entry: Optional[Entry] = None
    private: Optional[PrivateTarget] = None
    statement: Optional[cst.SimpleStatementLine] = None  # import statements
    import_node: Optional[cst.CSTNode] = None  # cst.Import | cst.ImportFrom
    call: Optional[cst.Call] = None  # the attribute is this call's callee
    partial: Optional[cst.Call] = None
    local: str = ""  # the name an import binds
    binding: Optional[Binding] = None
    uses: list[NameUse] = field(default_factory=list)
    uses_complete: bool = True  # every Name spelled `local` resolves to this import


@dataclass(eq=False)
class ModelRead:
    node: cst.Attribute  # `<receiver>.model`
    scope: Scope


@dataclass(eq=False)
class CurrencyFacts:
    references: list[Reference]
    model_reads: list[ModelRead]


def _dotted(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _is_private_optax(qualname: Optional[str]) -> bool:
    return bool(qualname) and qualname.startswith("optax.") and "._" in qualname


class _Collector:
    def __init__(self, facts, table: CurrencyTable, want_model: bool) -> None:
        self.facts = facts
        self.table = table
        self.want_model = want_model
        self.refs: list[Reference] = []
        self.model_reads: list[ModelRead] = []
        # Keyed by id: asked of every node, and a libcst node's __hash__ is Python code.
        self.scope_of = {id(s.node): s for s in facts.raw.scopes}
        self.callee: dict[int, cst.Call] = {}
        self.partial_arg: dict[int, cst.Call] = {}
        self.names: dict[str, list[tuple[cst.Name, Scope]]] = {}
        self.leaves = table.leaves
        # From the recorded imports, before walking: names whose uses a fix may need
        # (bound by an import the table knows), and names bound to private optax modules.
        self.watch: set[str] = set()
        self.private_roots: set[str] = set()
        for scope in facts.raw.scopes:
            for name, bindings in scope.bindings.items():
                for binding in bindings:
                    if binding.kind != "import" or not binding.qualname:
                        continue
                    if _is_private_optax(binding.qualname):
                        self.private_roots.add(name)
                    if table.lookup(binding.qualname) is not None or table.private_target(binding.qualname):
                        self.watch.add(name)

    # -- the walk -----------------------------------------------------------------
    def run(self) -> CurrencyFacts:
        module = self.facts.module
        stack: list[tuple[cst.CSTNode, Scope, Optional[cst.CSTNode]]] = [(module, self.facts.raw.module_scope, None)]
        Attribute, Name, Call, Param = cst.Attribute, cst.Name, cst.Call, cst.Param
        while stack:
            node, scope, line = stack.pop()
            kind = type(node)
            if kind is cst.SimpleStatementLine:
                line = node
            elif kind is cst.Import or kind is cst.ImportFrom:
                self.import_(node, scope, line)
                continue
            elif kind is Call:
                self.call(node, scope)
            elif kind is Attribute:
                root = self.attribute(node, scope)
                if root is not None:
                    stack.append((root, scope, line))
                continue
            elif kind is Name:
                if node.value in self.watch:
                    self.names.setdefault(node.value, []).append((node, scope))
                continue
            elif kind is Param:
                for child in (node.default, node.annotation):
                    if child is not None:
                        stack.append((child, scope, line))
                continue
            inner = self.scope_of.get(id(node))
            if inner is None or inner is scope:
                children = list(iter_children(node))
                for child in reversed(children):
                    stack.append((child, scope, line))
            else:
                for child, child_scope in reversed(self.children(node, scope, inner)):
                    stack.append((child, child_scope, line))
        self.link_uses()
        return CurrencyFacts(self.refs, self.model_reads)

    @staticmethod
    def children(node: cst.CSTNode, scope: Scope, inner: Scope) -> list[tuple[cst.CSTNode, Scope]]:
        """Children of a node that opens a scope: decorators, defaults and annotations
        are evaluated outside, the body inside."""
        if isinstance(node, cst.FunctionDef):
            out = [(d, scope) for d in node.decorators]
            out.append((node.params, scope))
            if node.returns is not None:
                out.append((node.returns, scope))
            out.append((node.body, inner))
            return out
        if isinstance(node, cst.ClassDef):
            out = [(d, scope) for d in node.decorators]
            out += [(a, scope) for a in (*node.bases, *node.keywords)]
            out.append((node.body, inner))
            return out
        if isinstance(node, cst.Lambda):
            return [(node.params, scope), (node.body, inner)]
        return [(c, scope) for c in iter_children(node)]

    def call(self, node: cst.Call, scope: Scope) -> None:
        self.callee[id(node.func)] = node
        args = node.args
        if args and args[0].keyword is None and not args[0].star:
            func = node.func
            name = func.value if type(func) is cst.Name else (func.attr.value if type(func) is cst.Attribute else "")
            if name == "partial" and qualified_name(func, scope) in _PARTIAL:
                self.partial_arg[id(args[0].value)] = node

    def attribute(self, node: cst.Attribute, scope: Scope) -> Optional[cst.CSTNode]:
        """Record a reference spelled by this attribute chain; return the chain's root
        when it is not a plain name (its subtree still needs walking)."""
        chain = []
        current: cst.BaseExpression = node
        while type(current) is cst.Attribute:
            chain.append(current)
            current = current.value
        if type(current) is not cst.Name:
            return current
        root = current.value
        if root in self.watch:
            self.names.setdefault(root, []).append((current, scope))
        if self.want_model and node.attr.value == "model" and len(chain) == 1:
            self.model_reads.append(ModelRead(node, scope))
        # Cheap test first: a chain can only matter if it spells a table leaf, a private
        # component, or starts from a name bound to a private optax module.
        leaves = self.leaves
        if root not in self.private_roots and not any(
            a.attr.value in leaves or a.attr.value.startswith("_") for a in chain
        ):
            return None
        _, bindings = lookup(root, scope)
        if not bindings or bindings[0].kind != "import" or any(
            b.kind != "import" or b.qualname != bindings[0].qualname for b in bindings
        ):
            return None
        qual = bindings[0].qualname
        spelled = []
        for sub in reversed(chain):  # innermost first
            qual = f"{qual}.{sub.attr.value}"
            spelled.append((sub, qual))
        for sub, qual in reversed(spelled):  # longest spelled path first
            entry = self.table.entries.get(qual)
            private = None if entry is not None else self.table.private_target(qual)
            if entry is None and private is None:
                continue
            self.refs.append(Reference("attribute", sub, qual, scope, entry=entry, private=private))
            break
        return None

    def import_(self, node: cst.CSTNode, scope: Scope, line: Optional[cst.CSTNode]) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                dotted = _dotted(alias.name)
                entry = self.table.lookup(dotted)
                if entry is not None and entry.kind == "module":
                    self.refs.append(Reference("import", alias, dotted, scope, entry=entry,
                                               statement=line, import_node=node))
                elif dotted in self.table.removed_private_modules:
                    self.refs.append(Reference("import", alias, dotted, scope, statement=line, import_node=node,
                                               private=PrivateTarget("", self.table.removed_private_modules[dotted])))
            return
        assert isinstance(node, cst.ImportFrom)
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        base = _dotted(node.module)
        for alias in node.names:
            name = _dotted(alias.name)
            qual = f"{base}.{name}"
            entry = self.table.lookup(qual)
            private = None if entry is not None else self.table.private_target(qual)
            if entry is None and private is None:
                continue
            local = _dotted(alias.asname.name) if alias.asname is not None else name
            _, bindings = lookup(local, scope)
            binding = next((b for b in bindings if b.kind == "import" and b.node is line and b.qualname == qual), None)
            self.refs.append(Reference("import_from", alias, qual, scope, entry=entry, private=private,
                                       statement=line, import_node=node, local=local, binding=binding))

    def link_uses(self) -> None:
        for ref in self.refs:
            if ref.kind == "attribute":
                ref.call = self.callee.get(id(ref.node))
                ref.partial = self.partial_arg.get(id(ref.node))
                continue
            if ref.kind != "import_from" or ref.binding is None:
                ref.uses_complete = ref.kind != "import_from"
                continue
            for name, scope in self.names.get(ref.local, ()):
                _, bindings = lookup(name.value, scope)
                if bindings != [ref.binding]:
                    ref.uses_complete = False
                    continue
                ref.uses.append(NameUse(name, scope, self.callee.get(id(name)), self.partial_arg.get(id(name))))
            # Bound more than once in its scope (re-imported, reassigned): uses are ambiguous.
            if ref.binding.scope.bindings.get(ref.local) != [ref.binding]:
                ref.uses_complete = False




def table_for(facts) -> CurrencyTable:
    return load_currency_table(facts.api)


def currency_references(facts) -> CurrencyFacts:
    """References to table paths in this module."""
    table = table_for(facts)
    want_model = _has_nnx_optimizer(facts, table)
    if facts.text is not None and not want_model and not table.may_be_mentioned(facts.text):
        return CurrencyFacts([], [])
    found = _Collector(facts, table, want_model).run()
    own = owning_package(facts.path)
    if own is not None:
        # A library's own modules use its private and deprecated names on purpose (and
        # rewriting them to the public API can make the package import itself).
        found.references = [r for r in found.references if r.qualname.split(".", 1)[0] != own]
        if own == "flax":
            found.model_reads = []
    return found


# --- nnx.Optimizer (OPX703) --------------------------------------------------------------

def _homes(table: CurrencyTable) -> frozenset[str]:
    return frozenset(table.nnx.get("homes", ()))


def _has_nnx_optimizer(facts, table: CurrencyTable) -> bool:
    if facts.text is not None and "Optimizer" not in facts.text:
        return False
    return any(facts.calls_by_name.get(h) for h in _homes(table)) or any(
        b.kind == "import" and b.qualname in _homes(table)
        for s in facts.raw.scopes for bs in s.bindings.values() for b in bs)


def nnx_rebound(facts) -> bool:
    """`nnx.Optimizer = nnx.ModelAndOptimizer` (flax's own migration shim): in this
    file the name builds the class that keeps the old API."""
    homes = _homes(table_for(facts))
    return any(
        qualified_name(target, scope) in homes for target, _, scope in facts.raw.attribute_stores
    )


def nnx_constructions(facts) -> list[CallRecord]:
    if owning_package(facts.path) == "flax" or nnx_rebound(facts):
        return []  # flax's own modules define and test the API; a shim keeps the old one
    table = table_for(facts)
    out: list[CallRecord] = []
    for home in sorted(_homes(table)):
        out.extend(facts.calls_by_name.get(home, ()))
    return out


@dataclass(eq=False)
class OptimizerOrigin:
    construction: Optional[cst.Call]  # None: known only from an annotation
    scope: Scope  # where the construction (or the annotated function) is
    binding: Optional[Binding]  # the receiver's binding that was followed


def call_sites(facts, function: Scope) -> list[CallRecord]:
    """Direct calls `f(...)` of a module function, where `f` resolves to its def."""
    func = function.node
    if not isinstance(func, cst.FunctionDef):
        return []
    out = []
    for record in facts.raw.calls:
        callee = record.node.func
        if isinstance(callee, cst.Name) and callee.value == func.name.value:
            _, bindings = lookup(callee.value, record.scope)
            if len(bindings) == 1 and bindings[0].kind == "def" and bindings[0].node is func:
                out.append(record)
    return out


def optimizer_origin(facts, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Optional[OptimizerOrigin]:
    """Where the value of `expr` comes from, when that is an `nnx.Optimizer(...)`."""
    if not isinstance(expr, cst.Name) or depth > 2:
        return None
    table = table_for(facts)
    homes = _homes(table)
    owner, bindings = lookup(expr.value, scope)
    if not bindings:
        return None
    origins: list[OptimizerOrigin] = []
    for binding in bindings:
        if binding.kind in ("assign", "annassign") and not binding.index and isinstance(binding.value, cst.Call):
            if facts.canonical(binding.value.func, binding.scope) in homes:
                origins.append(OptimizerOrigin(binding.value, binding.scope, binding))
                continue
            return None
        if binding.kind == "param" and owner is not None and isinstance(owner.node, cst.FunctionDef):
            origin = _param_origin(facts, owner, binding, depth)
            if origin is None:
                return None
            origins.append(origin)
            continue
        return None
    return origins[0] if origins else None


def _param_origin(facts, owner: Scope, binding: Binding, depth: int) -> Optional[OptimizerOrigin]:
    """A parameter is an nnx.Optimizer when every call of its function passes one, or
    when it is annotated so and no call passes an nnx.ModelAndOptimizer (a subclass
    that keeps the one-argument update and .model)."""
    table = table_for(facts)
    legacy = frozenset(table.nnx.get("legacy_homes", ()))
    from_sites: list[OptimizerOrigin] = []
    all_known = True
    for site in call_sites(facts, owner):
        arg = param_arg(site.node, owner.node, binding.name)
        if arg is not None and _constructed_by(facts, arg, site.scope) in legacy:
            return None
        origin = optimizer_origin(facts, arg, site.scope, depth + 1) if arg is not None else None
        if origin is None:
            all_known = False
        else:
            from_sites.append(OptimizerOrigin(origin.construction, origin.scope, binding))
    if from_sites and all_known:
        return from_sites[0]
    annotation = getattr(binding.node, "annotation", None)
    if annotation is not None and qualified_name(annotation.annotation, owner) in _homes(table):
        if any(facts.calls_by_name.get(home) for home in legacy):
            return None  # the file builds a ModelAndOptimizer: the annotation may be the wider type
        return OptimizerOrigin(None, owner, binding)
    return None


def _constructed_by(facts, expr: cst.BaseExpression, scope: Scope) -> Optional[str]:
    """The canonical callee of the one call a name was assigned from."""
    if not isinstance(expr, cst.Name):
        return None
    _, bindings = lookup(expr.value, scope)
    if len(bindings) != 1 or bindings[0].kind not in ("assign", "annassign") or bindings[0].index:
        return None
    value = bindings[0].value
    if not isinstance(value, cst.Call):
        return None
    return _factory_product(facts, value, bindings[0].scope) or facts.canonical(value.func, bindings[0].scope)


def _factory_product(facts, call: cst.Call, scope: Scope) -> Optional[str]:
    """The canonical callee every `return` of a module function returns a call of, when
    `call` calls such a function (`make_optimizer(model)` returning
    `nnx.ModelAndOptimizer(...)`); None otherwise."""
    if not isinstance(call.func, cst.Name):
        return None
    _, bindings = lookup(call.func.value, scope)
    if len(bindings) != 1 or bindings[0].kind != "def" or not isinstance(bindings[0].node, cst.FunctionDef):
        return None
    function = facts.raw.functions.get(bindings[0].node)
    if function is None:
        return None
    products = set()
    for node in walk(bindings[0].node.body):
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            return None  # a nested function's returns are not this one's
        if isinstance(node, cst.Return):
            if not isinstance(node.value, cst.Call):
                return None
            products.add(facts.canonical(node.value.func, function))
    return products.pop() if len(products) == 1 else None


def _single_binding(name: str, scope: Scope) -> Optional[Binding]:
    _, bindings = lookup(name, scope)
    return bindings[0] if len(bindings) == 1 else None


def model_name_at(facts, receiver: cst.BaseExpression, scope: Scope) -> Optional[str]:
    """The name, visible at `scope`, of the model an nnx.Optimizer receiver was built on."""
    if not isinstance(receiver, cst.Name):
        return None
    _, bindings = lookup(receiver.value, scope)
    if len(bindings) != 1:
        return None
    binding = bindings[0]
    if binding.kind in ("assign", "annassign") and isinstance(binding.value, cst.Call):
        model = call_arg_expr(binding.value, 0, "model")
        if not isinstance(model, cst.Name):
            return None
        there = _single_binding(model.value, binding.scope)
        return model.value if there is not None and there is _single_binding(model.value, scope) else None
    if binding.kind != "param" or not isinstance(binding.scope.node, cst.FunctionDef):
        return None
    function = binding.scope
    func = function.node
    sites = call_sites(facts, function)
    if not sites:
        return None
    candidates: Optional[set[str]] = None
    for site in sites:
        arg = param_arg(site.node, func, binding.name)
        if not isinstance(arg, cst.Name):
            return None
        outer = _single_binding(arg.value, site.scope)
        if outer is None or not isinstance(outer.value, cst.Call) or outer.kind not in ("assign", "annassign"):
            return None
        model = call_arg_expr(outer.value, 0, "model")
        if not isinstance(model, cst.Name):
            return None
        model_binding = _single_binding(model.value, outer.scope)
        if model_binding is None:
            return None
        here = set()
        for name in function.params:
            if name == binding.name:
                continue
            value = param_arg(site.node, func, name)
            if isinstance(value, cst.Name) and _single_binding(value.value, site.scope) is model_binding:
                here.add(name)
        candidates = here if candidates is None else candidates & here
    if not candidates or len(candidates) != 1:
        return None
    name = next(iter(candidates))
    return name if function.bindings.get(name, []) and len(function.bindings[name]) == 1 else None
