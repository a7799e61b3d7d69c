"""Where each rule's class lives, from the catalogue alone: OPXnnn's `family` and `name`
(rules/OPXnnn.toml) name its module, `optax_lint.rules.<family>.<name>` with `-` as `_`,
which is imported only when the rule is asked for. Codes of the `meta` family (syntax
and I/O errors, unused noqa, internal errors) are the engine's own and have no module.

Nothing here imports a rule, libcst or the facts: the prefilter asks for a code's
family package before any rule is needed.
"""

from __future__ import annotations

import functools
import importlib
from typing import Iterable

from optax_lint.core.catalogue import load_catalogue

META = "meta"

_CLASSES: dict[str, type] = {}


def python_name(name: str) -> str:
    """A catalogue family or rule name as a Python module name: `chain-order` -> `chain_order`."""
    return name.replace("-", "_")


@functools.lru_cache(maxsize=1)
def family_packages() -> dict[str, str]:
    """Every code a rule implements -> its family's package (`optax_lint.rules.chain_order`)."""
    return {
        code: f"optax_lint.rules.{python_name(spec.family)}"
        for code, spec in load_catalogue().items()
        if spec.family != META
    }


def rule_class(code: str) -> type:
    """The rule class of `code`, its module imported on first request (KeyError for a
    code no rule implements)."""
    cls = _CLASSES.get(code)
    if cls is None:
        if code not in family_packages():
            raise KeyError(f"{code} is implemented by no rule module")
        spec = load_catalogue()[code]
        module = importlib.import_module(f"optax_lint.rules.{python_name(spec.family)}.{python_name(spec.name)}")
        cls = _CLASSES[code] = defined_rule(module, code)
    return cls


def defined_rule(module, code: str) -> type:
    """The one class `module` defines whose `code` is `code` (LookupError otherwise)."""
    found = [
        obj for obj in vars(module).values()
        if isinstance(obj, type) and obj.__module__ == module.__name__ and vars(obj).get("code") == code
    ]
    if len(found) != 1:
        raise LookupError(f"{module.__name__} defines {len(found)} rule classes with code {code}, not one")
    return found[0]


def load(codes: Iterable[str]) -> dict[str, type]:
    """The rule classes of those of `codes` a rule implements (meta codes are skipped)."""
    return {code: rule_class(code) for code in sorted(codes) if code in family_packages()}


def load_all() -> dict[str, type]:
    """Every rule class, by code (for tests, docs and tools: a lint loads only what it runs)."""
    return load(family_packages())
