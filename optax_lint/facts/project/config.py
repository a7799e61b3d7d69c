"""Reading a project's configuration the way its code would see it, without running it.

Real JAX projects keep the numbers that decide the run context (steps, batch size,
model width) in config objects, often in another file:
- ml_collections: `config.num_train_steps = 100_000` inside `get_config()` in
  `configs/*.py` (also `ConfigDict({...})` literals and configs built on another
  config module's `get_config()`);
- absl flags: `flags.DEFINE_integer("num_train_steps", 1000, ...)` and holders
  (`_STEPS = flags.DEFINE_integer(...)`, `_STEPS.value`), `config_flags.DEFINE_config_file`;
- argparse: `parser.add_argument("--num-train-steps", type=int, default=1000)`;
- dataclass defaults: `@dataclass class TrainConfig: num_train_steps: int = 1000`.

`Evaluator` computes a static value for an expression such as
`config.num_epochs * steps_per_epoch`, following names assigned once (values.py
rules), and resolving attribute paths on config objects through those sources.
Every result carries a confidence and the place it was written.

Cross-file reads are bounded: only modules the linted file imports (resolved to
files inside the project root), `configs/*.py` beside it, and config modules those
import, each at most MAX_FILE_BYTES, at most MAX_FILES_PER_FILE per linted file.
Files are parsed with libcst (never imported or executed) and cached per run
(`clear_cache()`, called by `api.clear_caches()`).
"""

from __future__ import annotations

import math
import operator
import os
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional

import libcst as cst

from optax_lint.core import readlog
from optax_lint.syntax.names import lookup, qualified_name
from optax_lint.syntax.values import Unknown, single_binding, value_of
from optax_lint.syntax.walker import Scope

MAX_FILE_BYTES = 256 * 1024
MAX_FILES_PER_FILE = 24
MAX_CONFIGS_BESIDE = 16
_CACHE_SIZE = 96
_CACHE: "OrderedDict[tuple, object]" = OrderedDict()  # parsed modules
_TEXTS: "OrderedDict[tuple, Optional[str]]" = OrderedDict()  # file texts
STATS = {"reads": 0, "parses": 0}  # since the last clear_cache(): files read, files parsed (tests check bounds)

# Top-level packages that are never project files: skip the file-system probes.
_THIRD_PARTY = frozenset(
    {
        "jax", "jaxlib", "flax", "optax", "orbax", "numpy", "np", "scipy", "ml_collections", "absl",
        "haiku", "equinox", "chex", "tensorflow", "tf", "tensorflow_datasets", "torch", "transformers",
        "functools", "itertools", "os", "sys", "re", "math", "time", "json", "typing", "dataclasses",
        "collections", "pathlib", "logging", "argparse", "pickle", "abc", "enum", "copy", "random",
        "contextlib", "tqdm", "wandb", "einops", "clu", "tensorstore", "msgpack", "gin", "datasets",
        "operator", "warnings", "shutil", "glob", "io", "string", "textwrap", "subprocess", "inspect",
    }
)
_CONFIG_ROOT = re.compile(
    r"(^|_)(config|cfg|conf|configs|hparams|hps|hp|args|flags|opts|options|settings|params_cfg|train_config|model_config)$",
    re.IGNORECASE,
)
CONFIDENCE_RANK = {"declared": 4, "high": 3, "medium": 2, "low": 1}


def clear_cache() -> None:
    _CACHE.clear()
    _TEXTS.clear()
    STATS["reads"] = 0
    STATS["parses"] = 0


def weaker(a: str, b: str) -> str:
    return a if CONFIDENCE_RANK.get(a, 0) <= CONFIDENCE_RANK.get(b, 0) else b


# ---------------------------------------------------------------------------
# Results


class Origin:
    """Where a value was written: a node in some module, shown as `file:line`."""

    __slots__ = ("facts", "node", "label")

    def __init__(self, facts, node: cst.CSTNode, label: str = "") -> None:
        self.facts = facts
        self.node = node
        self.label = label

    def location(self) -> str:
        return f"{self.facts.display_path}:{line_of(self.facts, self.node)}"


def line_of(facts, node: cst.CSTNode) -> int:
    positions = getattr(facts, "positions", None)
    if positions is None:
        from optax_lint.syntax.positions import Positions

        positions = facts.memo("context_positions", lambda f: Positions(f.module, f.text))
    return positions.span(node).line


@dataclass
class Found:
    value: Any
    confidence: str  # high | medium | low
    origin: Optional[Origin] = None
    detail: str = ""  # how it was found: "config.num_train_steps in configs/default.py"

    def capped(self, confidence: str, detail: Optional[str] = None) -> "Found":
        return Found(self.value, weaker(self.confidence, confidence), self.origin, self.detail if detail is None else detail)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---------------------------------------------------------------------------
# Loading project modules


def module_file(facts) -> Optional[str]:
    path = getattr(facts, "abspath", None)
    if path:
        return path
    candidate = facts.path
    if not candidate or candidate.startswith("<"):
        return None
    absolute = os.path.abspath(candidate)
    return absolute if readlog.isfile(absolute) else None


def _display(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _under(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


class Project:
    """The files around one linted module that may be read, and the reads so far."""

    def __init__(self, facts) -> None:
        from optax_lint.core.optax_api import load_api

        self.facts = facts
        self.api = getattr(facts, "api", None) or load_api()
        self.file = module_file(facts)
        self.dir = os.path.dirname(self.file) if self.file else None
        root = os.path.abspath(facts.root) if getattr(facts, "root", None) else None
        if self.file and root and _under(self.file, root):
            self.root = root
        else:
            self.root = self.dir
        self.loaded: list[str] = []
        self._config_modules: Optional[list] = None
        self._imports: Optional[list] = None

    # -- files ------------------------------------------------------------
    def resolve(self, qualname: str, from_dir: Optional[str]) -> Optional[tuple[str, list[str]]]:
        """`configs.default` -> (/proj/configs/default.py, []); `models.Transformer` ->
        (/proj/models.py, ["Transformer"]); None when no project file matches."""
        if not qualname or from_dir is None or self.root is None:
            return None
        dots = len(qualname) - len(qualname.lstrip("."))
        parts = [p for p in qualname.lstrip(".").split(".") if p]
        if dots:
            base = from_dir
            for _ in range(dots - 1):
                base = os.path.dirname(base)
            bases = [base]
        else:
            if not parts or parts[0] in _THIRD_PARTY:
                return None
            bases = []
            here = from_dir
            while True:
                bases.append(here)
                if here == self.root or not _under(here, self.root):
                    break
                parent = os.path.dirname(here)
                if parent == here:
                    break
                here = parent
        for base in bases:
            if not _under(base, self.root):
                continue
            for k in range(len(parts), 0, -1):
                stem = os.path.join(base, *parts[:k])
                for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                    if readlog.isfile(candidate) and candidate != self.file:
                        return candidate, parts[k:]
            if dots and not parts:
                init = os.path.join(base, "__init__.py")
                if readlog.isfile(init):
                    return init, []
        return None

    def text_of(self, path: str) -> Optional[str]:
        """The text of a project file (cached per run), or None when it may not be read."""
        path = os.path.abspath(path)
        if self.root is None or not _under(path, self.root) or path == self.file:
            return None
        try:
            stat = os.stat(path)
        except OSError:
            readlog.note_text(path, None, None)
            return None
        if stat.st_size > MAX_FILE_BYTES:
            readlog.note_text(path, stat, None)
            return None
        key = (path, stat.st_mtime_ns, stat.st_size)
        if key in _TEXTS:
            _TEXTS.move_to_end(key)
            readlog.note_text(path, stat, _TEXTS[key])
            return _TEXTS[key]
        if path not in self.loaded and len(self.loaded) >= MAX_FILES_PER_FILE:
            return None
        if path not in self.loaded:
            self.loaded.append(path)
        text = _read_text(path)
        readlog.note_text(path, stat, text)
        _TEXTS[key] = text
        while len(_TEXTS) > _CACHE_SIZE * 2:
            _TEXTS.popitem(last=False)
        return text

    def load(self, path: str, need: Iterable[str] = ()):
        """ModuleFacts of a project file (parsed once per run), or None when it may not be
        read, or when its text mentions none of `need` (a cheap check before the parse)."""
        text = self.text_of(path)
        if text is None:
            return None
        if need and not any(word in text for word in need):
            return None
        path = os.path.abspath(path)
        key = (path, len(text), hash(text))
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
        facts = _parse_module(path, text, self.api, self.root)
        _CACHE[key] = facts
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        return facts

    def module_of(self, qualname: str, facts, need: Iterable[str] = ()) -> Optional[tuple[object, list[str]]]:
        here = module_file(facts)
        resolved = self.resolve(qualname, os.path.dirname(here) if here else self.dir)
        if resolved is None:
            return None
        path, rest = resolved
        module = self.load(path, need)
        return (module, rest) if module is not None else None

    def imported_paths(self) -> list[str]:
        """Project files the linted file imports (any scope), in order; nothing is read."""
        if self._imports is None:
            out: list[str] = []
            for qual in _import_qualnames(self.facts):
                resolved = self.resolve(qual, self.dir)
                if resolved is not None and resolved[0] not in out:
                    out.append(resolved[0])
            self._imports = out
        return self._imports

    def imported_modules(self, need: Iterable[str] = ()) -> list:
        """Parsed project modules the file imports (those whose text mentions `need`)."""
        out = []
        for path in self.imported_paths():
            module = self.load(path, need)
            if module is not None:
                out.append(module)
        return out

    def config_paths(self) -> list[str]:
        """Files that define get_config(): `configs/*.py` beside the file, then imports
        (a text check; nothing is parsed)."""
        if self._config_modules is None:
            candidates: list[str] = []
            if self.dir is not None:
                folder = os.path.join(self.dir, "configs")
                if readlog.isdir(folder):
                    try:
                        names = sorted(n for n in readlog.listdir(folder) if n.endswith(".py") and not n.startswith("__"))
                    except OSError:
                        names = []
                    candidates += [os.path.join(folder, n) for n in names[:MAX_CONFIGS_BESIDE]]
            candidates += self.imported_paths()
            out: list[str] = []
            for path in candidates:
                path = os.path.abspath(path)
                text = self.text_of(path)
                if text is not None and "def get_config" in text and path not in out:
                    out.append(path)
            self._config_modules = out
        return self._config_modules

    def config_modules(self, need: Iterable[str] = ()) -> list:
        """Parsed config modules; with `need`, only those that may set it: their text names
        it, or they build on another module's get_config()."""
        out = []
        for path in self.config_paths():
            text = self.text_of(path) or ""
            if need and not any(word in text for word in need) and text.count("get_config") < 2:
                continue
            module = self.load(path)
            if module is not None and config_of(module, self).has_get_config:
                out.append(module)
        return out

    def config_path(self, relative: str):
        """A config file named in code (`DEFINE_config_file("config", "configs/default.py")`)."""
        if not relative or self.dir is None:
            return None
        for base in (self.dir, self.root):
            if base is None:
                continue
            candidate = os.path.abspath(os.path.join(base, relative.split(":", 1)[0]))
            if readlog.isfile(candidate):
                return self.load(candidate)
        return None


def _read_text(path: str) -> Optional[str]:
    from optax_lint.core.source import read_source

    STATS["reads"] += 1
    try:
        # read_source: regular files only, opened non-blocking (a FIFO or a symlink to
        # /dev/stdin must not hang the run), bounded, decoded as Python would.
        return read_source(path, max_bytes=MAX_FILE_BYTES).text
    except Exception:  # unreadable or undecodable: that module tells us nothing
        return None


def _parse_module(path: str, text: str, api, root: Optional[str]):
    from optax_lint.facts.module import ModuleFacts
    from optax_lint.syntax.parsing import cpython_check

    STATS["parses"] += 1
    try:
        if cpython_check(text, path)[1]:  # nested beyond CPython's limits: slow for libcst
            return None
        module = cst.parse_module(text)
    except Exception:  # unparsable: that module tells us nothing
        return None
    facts = ModuleFacts(module, _display(path), api, root=root, text=text)
    facts.abspath = path
    return facts


def _import_qualnames(facts) -> Iterator[str]:
    seen = set()
    for scope in facts.raw.scopes:
        for bindings in scope.bindings.values():
            for binding in bindings:
                if binding.kind == "import" and binding.qualname and binding.qualname not in seen:
                    seen.add(binding.qualname)
                    yield binding.qualname


def project_of(facts) -> Project:
    return facts.memo("context_project", Project)


# ---------------------------------------------------------------------------
# What one module defines


@dataclass
class ClassInfo:
    name: str
    scope: Scope
    kind: str  # dataclass | module | namedtuple | plain
    fields: "OrderedDict[str, tuple[Optional[cst.BaseExpression], cst.CSTNode]]"  # name -> (default expr, statement)
    facts: object = None  # the module that defines it


class ModuleConfig:
    """The config sources one module defines (computed once per module)."""

    def __init__(self, facts, project: Project) -> None:
        self.facts = facts
        self.project = project
        self.flags: dict[str, Found] = {}
        self.config_flags: dict[str, Optional[cst.BaseExpression]] = {}  # flag name -> default (path string or config expr)
        self.flag_holders: dict[str, str] = {}
        self.argparse: dict[str, Found] = {}
        self.classes: dict[str, ClassInfo] = {}
        self._ml: Optional[dict[tuple, Found]] = None
        self._ml_busy = False
        self.has_get_config = any(
            s.name == "get_config" and s.parent is facts.raw.module_scope for s in facts.raw.functions.values()
        )
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

    # -- ml_collections ----------------------------------------------------
    @property
    def ml(self) -> dict[tuple, Found]:
        if self._ml is None:
            if self._ml_busy:  # a config module importing itself through a cycle
                return {}
            self._ml_busy = True
            try:
                self._ml = self._ml_from_get_config()
            finally:
                self._ml_busy = False
        return self._ml

    def _ml_from_get_config(self) -> dict[tuple, Found]:
        facts = self.facts
        fn = next(
            (s for s in facts.raw.functions.values() if s.name == "get_config" and s.parent is facts.raw.module_scope),
            None,
        )
        if fn is None:
            return {}
        return MlBuilder(self, fn).run()


def config_of(facts, project: Project) -> ModuleConfig:
    return facts.memo("context_config", lambda f: ModuleConfig(f, project))


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


_MODULE_BASES = ("Module", "nn.Module", "linen.Module", "nnx.Module", "hk.Module", "eqx.Module")


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
    if kind == "plain" and not fields:
        return None
    return ClassInfo(node.name.value, scope, kind, fields, facts)


class MlBuilder:
    """Replays the statements of `get_config()` to the config they build."""

    def __init__(self, module_config: ModuleConfig, fn: Scope) -> None:
        self.mc = module_config
        self.facts = module_config.facts
        self.fn = fn
        self.vars: set[str] = set()
        self.entries: dict[tuple, Found] = {}
        self.evaluator = Evaluator(self.facts, module_config.project, local_config=self)

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


# The same operator and builtin tables the in-file evaluator uses.
from optax_lint.syntax.values import _BINOPS  # noqa: E402
from optax_lint.syntax.values import _SAFE_BUILTINS as _SAFE

_MAX_DEPTH = 20


def _split_attribute(expr: cst.BaseExpression) -> tuple[Optional[cst.BaseExpression], list[str]]:
    names = []
    node = expr
    while isinstance(node, cst.Attribute):
        names.append(node.attr.value)
        node = node.value
    names.reverse()
    return node, names


class Evaluator:
    """Static values with provenance; Unknown(reason) when the value cannot be known."""

    def __init__(self, facts, project: Optional[Project] = None, local_config: Optional[MlBuilder] = None) -> None:
        self.facts = facts
        self.project = project if project is not None else project_of(facts)
        self.local_config = local_config

    # -- entry point ------------------------------------------------------
    def eval(self, expr: Optional[cst.BaseExpression], scope: Scope, depth: int = 0):
        if expr is None:
            return Unknown("no expression")
        if depth > _MAX_DEPTH:
            return Unknown("expression too deep")
        d = depth + 1
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
            value = value_of(expr, scope)
            if isinstance(value, Unknown):
                return value
            return Found(value, "high", Origin(self.facts, expr), "")
        if isinstance(expr, cst.Name):
            return self.name(expr, scope, d)
        if isinstance(expr, cst.Attribute):
            root, names = _split_attribute(expr)
            if isinstance(root, cst.Name):
                return self.path(root.value, names, scope, d)
            return Unknown("attribute of an expression")
        if isinstance(expr, cst.UnaryOperation):
            inner = self.eval(expr.expression, scope, d)
            if not isinstance(inner, Found) or not _number(inner.value):
                return inner if isinstance(inner, Unknown) else Unknown("unary operation")
            if isinstance(expr.operator, cst.Minus):
                return Found(-inner.value, inner.confidence, inner.origin, inner.detail)
            if isinstance(expr.operator, cst.Plus):
                return inner
            return Unknown("unary operation")
        if isinstance(expr, cst.BinaryOperation):
            op = _BINOPS.get(type(expr.operator))
            if op is None:
                return Unknown("operator")
            left = self.eval(expr.left, scope, d)
            if not isinstance(left, Found):
                return left
            right = self.eval(expr.right, scope, d)
            if not isinstance(right, Found):
                return right
            if not (_number(left.value) and _number(right.value)):
                return Unknown("arithmetic on non-numbers")
            if op is operator.pow and (abs(right.value) > 64 or abs(left.value) > 1e6):
                return Unknown("power too large")
            try:
                result = op(left.value, right.value)
            except (ZeroDivisionError, OverflowError, ValueError):
                return Unknown("arithmetic error")
            if isinstance(result, float) and not math.isfinite(result):
                return Unknown("non-finite arithmetic")
            origin = _pick_origin(left, right)
            detail = " ".join(x for x in (left.detail, right.detail) if x)
            return Found(result, weaker(left.confidence, right.confidence), origin, detail)
        if isinstance(expr, cst.Call):
            return self.call(expr, scope, d)
        if isinstance(expr, cst.Subscript):
            return self.subscript(expr, scope, d)
        if isinstance(expr, (cst.Tuple, cst.List)):
            items = []
            confidence = "high"
            for element in expr.elements:
                if isinstance(element, cst.StarredElement):
                    return Unknown("starred element")
                item = self.eval(element.value, scope, d)
                if not isinstance(item, Found):
                    return item
                items.append(item.value)
                confidence = weaker(confidence, item.confidence)
            return Found(tuple(items) if isinstance(expr, cst.Tuple) else items, confidence, Origin(self.facts, expr))
        value = value_of(expr, scope)
        if isinstance(value, Unknown):
            return value
        return Found(value, "high", Origin(self.facts, expr))

    # -- names ------------------------------------------------------------
    def name(self, expr: cst.Name, scope: Scope, depth: int):
        word = expr.value
        if word in ("True", "False", "None"):
            return Found({"True": True, "False": False, "None": None}[word], "high", Origin(self.facts, expr))
        return self.word(word, scope, depth)

    def word(self, word: str, scope: Scope, depth: int = 0):
        """The value of the name `word` as seen from `scope` (no node needed)."""
        owner, bindings = lookup(word, scope)
        if not bindings:
            return Unknown(f"'{word}' is not assigned in this file")
        if len(bindings) == 1 and bindings[0].kind == "param":
            param = bindings[0].node
            if isinstance(param, cst.Param) and param.default is not None:
                parent = bindings[0].scope.parent or bindings[0].scope
                found = self.eval(param.default, parent, depth)
                if isinstance(found, Found):
                    return found.capped("low", f"default of parameter {word}")
            return Unknown(f"'{word}' is a parameter")
        if all(b.kind == "import" for b in bindings) and len({b.qualname for b in bindings}) == 1:
            return self.imported(bindings[0].qualname or "", [], depth)
        binding, reason = single_binding(word, scope)
        if binding is None:
            return Unknown(reason)
        found = self.eval(binding.value, binding.scope, depth)
        if not isinstance(found, Found):
            return found
        value = found.value
        for i in binding.index:
            if isinstance(value, (tuple, list)) and i < len(value):
                value = value[i]
            else:
                return Unknown(f"'{word}' is unpacked from an unknown value")
        origin = found.origin
        if origin is None or (origin.facts is self.facts and isinstance(origin.node, (cst.Integer, cst.Float))):
            origin = Origin(self.facts, binding.node)
        return Found(value, found.confidence, origin, found.detail or word)

    def imported(self, qualname: str, names: list[str], depth: int):
        found = self.project.module_of(qualname, self.facts) if self.project else None
        if found is None:
            return Unknown(f"{qualname} is not a project module")
        module, rest = found
        path = rest + names
        if not path:
            return Unknown("a module")
        other = Evaluator(module, self.project)
        if len(path) >= 2 and path[0] in config_of(module, self.project).classes:
            return other.class_field(config_of(module, self.project).classes[path[0]], path[1:], "medium", depth)
        result = other.word(path[0], module.raw.module_scope, depth)
        if len(path) > 1 or not isinstance(result, Found):
            return Unknown(f"{'.'.join(path)} in {module.display_path}") if not isinstance(result, Found) else Unknown("attribute of a module value")
        return result

    # -- attribute paths on config objects ---------------------------------
    def path(self, root: str, names: list[str], scope: Scope, depth: int):
        if depth > _MAX_DEPTH:
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
        if isinstance(func, cst.Attribute) and func.attr.value in ("parse_args", "parse_known_args"):
            if func.attr.value == "parse_known_args" and binding.index not in ((0,),):
                return Unknown("parse_known_args extras")
            return self.argparse_path(names)
        if binding.index:
            return Unknown("unpacked from a call")
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
        if isinstance(func, cst.Name) and depth < _MAX_DEPTH:
            # `args = parse_args()` where parse_args() returns parser.parse_args(): follow
            # a local helper's single returned value.
            _, fn_bindings = lookup(func.value, scope)
            if len(fn_bindings) == 1 and fn_bindings[0].kind == "def":
                fn = self.facts.raw.functions.get(fn_bindings[0].node)
                values = [r.node.value for r in fn.returns if r.node.value is not None] if fn is not None else []
                if len(values) == 1 and isinstance(values[0], (cst.Call, cst.Attribute, cst.Name)):
                    return self.path_of_value(values[0], fn, names, depth + 1)
        return Unknown("value of a call")

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
                return Evaluator(_facts_of(info, self), self.project).class_field(info, names, "medium", depth)
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
                for table in (mc.flags, mc.argparse):
                    if names[0] in table:
                        candidates.append(table[names[0]])
                for info in mc.classes.values():
                    if info.kind in ("dataclass", "namedtuple") and names[0] in info.fields:
                        result = Evaluator(mc.facts, self.project).class_field(info, names, "medium", 0)
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
                return mc.flags[names[0]]
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
                return mc.argparse[names[0]]
        return Unknown(f"--{names[0]} is not an argparse option defined in the project files read")

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
        owner = Evaluator(_facts_of(info, self), self.project)
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
                    return Evaluator(_facts_of(nested, self), self.project).class_field(nested, names[1:], cap, depth + 1)
                return Unknown("default_factory")
            else:
                return Unknown("default_factory")
        if len(names) > 1:
            if isinstance(default, cst.Call):
                nested, _ = self.class_of(default.func, info.scope.parent or info.scope)
                if nested is not None:
                    return Evaluator(_facts_of(nested, self), self.project).instance_path(nested, default, info.scope, names[1:], depth + 1)
            return Unknown("nested field")
        found = self.eval(default, info.scope, depth)
        if not isinstance(found, Found):
            return found
        return Found(found.value, weaker(found.confidence, cap), Origin(_facts_of(info, self), stmt), f"{info.name}.{names[0]} default")

    # -- calls and subscripts -----------------------------------------------------
    def call(self, expr: cst.Call, scope: Scope, depth: int):
        func = expr.func
        if isinstance(func, cst.Name) and func.value in _SAFE:
            _, bindings = lookup(func.value, scope)
            if bindings:
                return Unknown(f"'{func.value}' is shadowed")
            if not expr.args or any(a.keyword is not None or a.star for a in expr.args):
                return Unknown("builtin call form")
            values = []
            for arg in expr.args:
                found = self.eval(arg.value, scope, depth)
                if not isinstance(found, Found):
                    return found
                if not _number(found.value):
                    return Unknown("builtin on non-numbers")
                values.append(found)
            try:
                result = _SAFE[func.value](*[v.value for v in values])
            except (TypeError, ValueError, OverflowError):
                return Unknown("builtin error")
            confidence = "high"
            for v in values:
                confidence = weaker(confidence, v.confidence)
            origin = next((v.origin for v in values if v.origin is not None and not isinstance(v.origin.node, (cst.Integer, cst.Float))), values[0].origin)
            return Found(result, confidence, origin, " ".join(v.detail for v in values if v.detail))
        name = self.facts.canonical(func, scope) or ""
        if name in ("jax.device_count", "jax.local_device_count", "jax.process_count"):
            return Unknown(f"{name}() is known only at run time")
        return Unknown("value of a call")

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


def _facts_of(info: ClassInfo, evaluator: Evaluator):
    return info.facts if info.facts is not None else evaluator.facts


def _pick_origin(left: Found, right: Found) -> Optional[Origin]:
    for found in (left, right):
        if found.origin is not None and not isinstance(found.origin.node, (cst.Integer, cst.Float)):
            return found.origin
    return left.origin or right.origin


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
