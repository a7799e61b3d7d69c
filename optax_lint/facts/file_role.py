"""What a file is, from where it sits: a test, or a module of a library's own package.

- Test files (`test_*.py`, `*_test.py`, `conftest.py`, anything under a `tests/` or
  `test/` directory) and `test_*` functions exercise transforms in ways no training run
  does (pass-through masks, single updates, constant learning rates). What that means
  for the rules is decided in one place, the file's purpose (context/purpose.py).
- A module of optax's (flax's, jax's, orbax's) own package uses that package's private
  modules and deprecated names on purpose, and rewriting its imports to the public
  API can make the package import itself (a circular import). Its owning package is
  found from the path: the directories with an `__init__.py` above the file lead up to
  the top-level package; without them on disk, the directory after `site-packages` /
  `dist-packages`, or a library name directly followed by a private `_src`-style part.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import PurePath
from typing import Optional

from optax_lint.syntax.walker import Scope

LIBRARIES = frozenset({"optax", "flax", "jax", "jaxlib", "orbax", "chex"})
_TEST_DIRS = frozenset({"tests", "test", "testing"})


def is_test_file(path: Optional[str]) -> bool:
    if not path or path.startswith("<"):
        return False
    pure = PurePath(path)
    name = pure.name
    if name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py":
        return True
    return any(part in _TEST_DIRS for part in pure.parts[:-1])


def in_test_function(scope: Optional[Scope]) -> bool:
    """Inside a `test_*` function or method (or a `*Test` TestCase class)."""
    while scope is not None:
        if scope.kind == "function" and _TEST_FUNCTION.match(scope.name):
            return True
        if scope.kind == "class" and _TEST_CLASS.search(scope.name):
            return True
        scope = scope.parent
    return False


# What pytest and unittest collect: test_x / testX methods, TestX / XTest classes
# (not `testing_loop` or `Tester`).
_TEST_FUNCTION = re.compile(r"test(_|[A-Z0-9]|$)")
_TEST_CLASS = re.compile(r"^Test[A-Z_0-9]|Tests?$")


@functools.lru_cache(maxsize=4096)
def owning_package(path: Optional[str]) -> Optional[str]:
    """The top-level package a file belongs to, or None for a script / unknown."""
    if not path or path.startswith("<"):
        return None
    absolute = os.path.abspath(path)
    directory = os.path.dirname(absolute)
    top = None
    try:
        # Climb package directories; a directory without __init__.py inside a package
        # (optax/_src is a namespace directory) does not end the package.
        while True:
            parent = os.path.dirname(directory)
            here = os.path.isfile(os.path.join(directory, "__init__.py"))
            if here:
                top = os.path.basename(directory)
            elif not os.path.isfile(os.path.join(parent, "__init__.py")):
                break
            if parent == directory:
                break
            directory = parent
    except OSError:  # unreadable directories: fall back to the path's shape
        top = None
    if top:
        return top
    parts = PurePath(absolute).parts[:-1]
    for i, part in enumerate(parts[:-1]):
        if part in ("site-packages", "dist-packages"):
            return parts[i + 1]
    for i, part in enumerate(parts):
        if part in LIBRARIES and i + 1 < len(parts) and parts[i + 1].startswith("_"):
            return part
    return None


def belongs_to(path: Optional[str], library: str) -> bool:
    """Whether the file is part of `library`'s own package (e.g. optax/_src/alias.py)."""
    return owning_package(path) == library


def declares_context(facts) -> bool:
    """Whether the user declared any of the file's run context (command line, pragma or config)."""
    return any(v.declared for v in facts.run_context.values.values())


def display_path(path: str, root: Optional[str] = None) -> str:
    """A path for messages, never machine-specific: relative to the project root (or
    the working directory) when under it, else the file's name."""
    if not path or path.startswith("<") or not os.path.isabs(path):
        return path
    for base in (root, os.getcwd()):
        if not base:
            continue
        try:
            base = os.path.abspath(base)
            if os.path.commonpath([path, base]) == base:
                return os.path.relpath(path, base)
        except ValueError:  # another drive
            continue
    return os.path.basename(path)
