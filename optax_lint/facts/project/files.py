"""Reading the files of a user's project around one linted module: which module an
import names, their texts and parsed facts (cached per run), within bounds.

Cross-file reads are bounded: only modules the linted file imports (resolved to
files inside the project root), `configs/*.py` beside it, and config modules those
import, each at most MAX_FILE_BYTES, at most MAX_FILES_PER_FILE per linted file.
Files are parsed with libcst (never imported or executed) and kept for the run in
its ProjectFiles. Every look at the file system goes through core/readlog.py, which
records it for the result cache.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, Optional

from optax_lint.core import readlog

MAX_FILE_BYTES = 256 * 1024
MAX_FILES_PER_FILE = 24
MAX_CONFIGS_BESIDE = 16
_CACHE_SIZE = 96

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


class ProjectFiles:
    """The project files one run reads (api.run, a worker process of its pool, the
    language server, --show-context): their texts and parsed facts, so that a config
    module imported by a hundred scripts is read and parsed once; and the ReadLog of
    the file being linted, which records every look at the file system for the result
    cache. A linted module handed none gets its own (facts/module.py)."""

    def __init__(self, remember_probes: bool = True) -> None:
        # Whether a path is a file, asked once per run (~85k probes, 13k distinct paths,
        # on the real-repository corpus): a project's files do not come and go while it
        # is linted. The language server, which lives across edits, keeps no answer.
        self.probes: Optional[dict[str, bool]] = {} if remember_probes else None
        self.texts: "OrderedDict[tuple, Optional[str]]" = OrderedDict()  # (path, mtime, size) -> text
        self.modules: "OrderedDict[tuple, object]" = OrderedDict()  # (path, len, hash of text) -> facts
        self.reads = 0  # files read, and parsed, so far (tests check the bounds)
        self.parses = 0
        self.log: Optional[readlog.ReadLog] = None

    @contextmanager
    def recording(self) -> Iterator[readlog.ReadLog]:
        """Record the looks of the lint run inside the `with` block."""
        self.log = readlog.ReadLog()
        try:
            yield self.log
        finally:
            self.log = None

    def isfile(self, path: str) -> bool:
        """readlog.isfile (recorded in the linted file's log), answered once per run."""
        if self.probes is None:
            return readlog.isfile(path, self.log)
        found = self.probes.get(path)
        if found is None:
            found = self.probes[path] = readlog.isfile(path, self.log)
        elif self.log is not None:
            self.log.probes[path] = found
        return found

    def text(self, path: str, stat: os.stat_result, loaded: list[str]) -> Optional[str]:
        """The file's text: kept from earlier in the run, else read unless the linted
        file has used up its reads (`loaded`, the files it has read)."""
        key = (path, stat.st_mtime_ns, stat.st_size)
        if key in self.texts:
            self.texts.move_to_end(key)
            readlog.note_text(path, stat, self.texts[key], self.log)
            return self.texts[key]
        if path not in loaded and len(loaded) >= MAX_FILES_PER_FILE:
            return None
        if path not in loaded:
            loaded.append(path)
        self.reads += 1
        text = _read_text(path)
        readlog.note_text(path, stat, text, self.log)
        self.texts[key] = text
        while len(self.texts) > _CACHE_SIZE * 2:
            self.texts.popitem(last=False)
        return text

    def parsed(self, path: str, text: str, project: "Project"):
        """The facts of a project file, parsed once per run (None: it cannot be parsed)."""
        key = (path, len(text), hash(text))
        if key in self.modules:
            self.modules.move_to_end(key)
            return self.modules[key]
        self.parses += 1
        facts = _parse_module(path, text, project)
        self.modules[key] = facts
        while len(self.modules) > _CACHE_SIZE:
            self.modules.popitem(last=False)
        return facts


def module_file(facts, files: ProjectFiles) -> Optional[str]:
    path = getattr(facts, "abspath", None)
    if path:
        return path
    candidate = facts.path
    if not candidate or candidate.startswith("<"):
        return None
    absolute = os.path.abspath(candidate)
    return absolute if files.isfile(absolute) else None


def _display(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _under(path: str, root: str) -> bool:
    """Whether `path` is `root` or inside it. Both are absolute and normalised
    (abspath), so a prefix test ending at a separator is os.path.commonpath's answer
    at a tenth of its cost (asked ~30k times in a run over the real corpus)."""
    if path == root:
        return True
    return path.startswith(root if root.endswith(os.sep) else root + os.sep)


# Files and folders that mark the top of a repository or package (where `import pkg`
# resolves from).
_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def defines_function(text: str, rest: list[str]) -> bool:
    """A cheap check before a parse: `rest` names one function the text defines (`def
    name` at any indentation, so a superset of the module-level ones looked for)."""
    return len(rest) == 1 and re.search(rf"^[ \t]*(async[ \t]+)?def[ \t]+{re.escape(rest[0])}\b", text, re.M) is not None


def _marked_root(folder: str, files: "ProjectFiles") -> Optional[str]:
    """The nearest folder at or above `folder` holding a project marker, or None."""
    here = folder
    while True:
        for marker in _MARKERS:
            path = os.path.join(here, marker)
            if (readlog.isdir(path, files.log) or files.isfile(path)) if marker == ".git" else files.isfile(path):
                return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


class Project:
    """The files around one linted module that may be read, and the reads so far."""

    def __init__(self, facts) -> None:
        from optax_lint.core.optax_api import load_api

        self.facts = facts
        self.api = getattr(facts, "api", None) or load_api()
        self.files: ProjectFiles = getattr(facts, "project_files", None) or ProjectFiles()
        self.file = module_file(facts, self.files)
        self.dir = os.path.dirname(self.file) if self.file else None
        root = os.path.abspath(facts.root) if getattr(facts, "root", None) else None
        self._given_root = root if self.file and root and _under(self.file, root) else self.dir
        self._root: Optional[str] = None
        self.loaded: list[str] = []
        self._config_modules: Optional[list] = None
        self._imports: Optional[list] = None
        self._src: Optional[tuple[str]] = None  # the root's src/ folder, probed once

    @property
    def root(self) -> Optional[str]:
        """The folder imports resolve under: the run's root (its config's folder, else
        the first path's folder), widened to the file's repository, the nearest folder
        above it that holds a project marker, so that `examples/gpt2/train.py` run on
        its own still reads the package its repository imports from. Found on the first
        read across files: a file that reads none probes nothing."""
        if self._root is None:
            self._root = self._given_root
            marked = _marked_root(self.dir, self.files) if self.dir else None
            if marked is not None and self.file and _under(self.file, marked) and (self._root is None or len(marked) < len(self._root)):
                self._root = marked
        return self._root

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
            src = self._src_folder()
            if src is not None and src not in bases:
                bases.append(src)  # the src/ layout: the package lives under src/
        for base in bases:
            if not _under(base, self.root):
                continue
            for k in range(len(parts), 0, -1):
                stem = os.path.join(base, *parts[:k])
                for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                    if self.files.isfile(candidate) and candidate != self.file:
                        return candidate, parts[k:]
            if dots and not parts:
                init = os.path.join(base, "__init__.py")
                if self.files.isfile(init):
                    return init, []
        return None

    def _src_folder(self) -> Optional[str]:
        if self._src is None:
            src = os.path.join(self.root, "src")
            self._src = (src if readlog.isdir(src, self.files.log) else "",)
        return self._src[0] or None

    def text_of(self, path: str) -> Optional[str]:
        """The text of a project file (cached per run), or None when it may not be read."""
        path = os.path.abspath(path)
        if self.root is None or not _under(path, self.root) or path == self.file:
            return None
        try:
            stat = os.stat(path)
        except OSError:
            readlog.note_text(path, None, None, self.files.log)
            return None
        if stat.st_size > MAX_FILE_BYTES:
            readlog.note_text(path, stat, None, self.files.log)
            return None
        return self.files.text(path, stat, self.loaded)

    def load(self, path: str, need: Iterable[str] = (), accept: Optional[Callable[[str, list[str]], bool]] = None, rest: list[str] = ()):
        """ModuleFacts of a project file (parsed once per run), or None when it may not be
        read, or when its text mentions none of `need` or `accept(text, rest)` is false
        (cheap checks before the parse, which costs ~50x the read)."""
        text = self.text_of(path)
        if text is None:
            return None
        if need and not any(word in text for word in need):
            return None
        if accept is not None and not accept(text, list(rest)):
            return None
        return self.files.parsed(os.path.abspath(path), text, self)

    def module_of(self, qualname: str, facts, need: Iterable[str] = (), accept=None) -> Optional[tuple[object, list[str]]]:
        here = module_file(facts, self.files)
        resolved = self.resolve(qualname, os.path.dirname(here) if here else self.dir)
        if resolved is None:
            return None
        path, rest = resolved
        path, rest = self._reexported(path, rest)
        module = self.load(path, need, accept, rest)
        return (module, rest) if module is not None else None

    def _reexported(self, path: str, rest: list[str], depth: int = 3) -> tuple[str, list[str]]:
        """Follow a name a package's `__init__.py` re-exports (`from .network import
        SequenceNet`) to the module that defines it; (path, rest) unchanged otherwise."""
        while depth and rest and os.path.basename(path) == "__init__.py":
            depth -= 1
            text = self.text_of(path)
            source = _reexport_source(text, rest[0]) if text else None
            if source is None:
                break
            resolved = self.resolve(f"{source}.{rest[0]}", os.path.dirname(path))
            if resolved is None or resolved[0] == path:
                break
            path, rest = resolved[0], resolved[1] + list(rest[1:])
        return path, rest

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

    def imported_modules(self, need: Iterable[str] = (), accept: Optional[Callable[[str, list[str]], bool]] = None) -> list:
        """Parsed project modules the file imports (those whose text mentions `need` and
        passes `accept`)."""
        out = []
        for path in self.imported_paths():
            module = self.load(path, need, accept)
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
                if readlog.isdir(folder, self.files.log):
                    try:
                        names = sorted(n for n in readlog.listdir(folder, self.files.log) if n.endswith(".py") and not n.startswith("__"))
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
            if module is not None and defines_get_config(module):
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
            if self.files.isfile(candidate):
                return self.load(candidate)
        return None


def _read_text(path: str) -> Optional[str]:
    from optax_lint.core.source import read_source

    try:
        # read_source: regular files only, opened non-blocking (a FIFO or a symlink to
        # /dev/stdin must not hang the run), bounded, decoded as Python would.
        return read_source(path, max_bytes=MAX_FILE_BYTES).text
    except Exception:  # unreadable or undecodable: that module tells us nothing
        return None


def _parse_module(path: str, text: str, project: "Project"):
    """The facts of a project file, of the same kind as the linted module's."""
    from optax_lint.syntax.parsing import cpython_check, parse_module

    try:
        if cpython_check(text, path)[1]:  # nested beyond CPython's limits: slow for libcst
            return None
        module = parse_module(text)
    except Exception:  # unparsable: that module tells us nothing
        return None
    facts = type(project.facts)(module, _display(path), project.api, root=project.root, text=text, project_files=project.files)
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




def defines_get_config(facts) -> bool:
    """Whether the module defines a top-level `get_config()` (an ml_collections config)."""
    return any(s.name == "get_config" and s.parent is facts.raw.module_scope for s in facts.raw.functions.values())


_FROM_IMPORT = re.compile(r"^from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)", re.MULTILINE)


def _reexport_source(text: str, name: str) -> Optional[str]:
    """The module an `__init__.py` imports `name` from, under its own name, or None."""
    if name not in text:
        return None
    for match in _FROM_IMPORT.finditer(text):
        names = match.group(2).strip("() \t\r\n")
        for item in names.replace("\\", " ").split(","):
            words = item.split()
            if words and words[0] == name and (len(words) == 1 or words[-1] == name):
                return match.group(1)
    return None
