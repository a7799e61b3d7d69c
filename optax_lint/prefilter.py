"""Which rules can fire on a file, decided from its raw text before any parse.

Every rule family (a module under `optax_lint/rules/`) declares `TRIGGERS`: regular
expressions such that a file matching none of them cannot give that family a finding
(the family resolves names such as `optax.adamw` or `jax.pmap`, and a name cannot
be resolved from text that never spells it). `TRIGGERS` is a tuple of patterns, or a
function returning one when the words come from a data table. A file no selected
family triggers on is only syntax-checked; a family whose triggers miss is not run.

A new family without TRIGGERS fails the test that checks every registered rule.
"""

from __future__ import annotations

import importlib
import re
from typing import Iterable

_FAMILY_PATTERNS: dict[str, re.Pattern] = {}
_UNION: dict[frozenset, re.Pattern] = {}


def family_of(rule_cls: type) -> str:
    return rule_cls.__module__


def family_triggers(family: str) -> tuple[str, ...]:
    """The family module's TRIGGERS as a tuple of regex sources (KeyError when missing)."""
    module = importlib.import_module(family)
    triggers = module.TRIGGERS
    if callable(triggers):
        triggers = triggers()
    if not triggers:
        raise KeyError(f"{family} declares no TRIGGERS")
    return tuple(triggers)


def _compile(sources: Iterable[str]) -> re.Pattern:
    # Longest first, so a literal that contains another is tried first (same result, fewer steps).
    return re.compile("|".join(f"(?:{s})" for s in sorted(set(sources), key=lambda s: (-len(s), s))))


def family_pattern(family: str) -> re.Pattern:
    pattern = _FAMILY_PATTERNS.get(family)
    if pattern is None:
        pattern = _FAMILY_PATTERNS[family] = _compile(family_triggers(family))
    return pattern


def _families(codes: Iterable[str]) -> dict[str, list[str]]:
    from .rules import REGISTRY

    out: dict[str, list[str]] = {}
    for code in codes:
        rule_cls = REGISTRY.get(code)
        if rule_cls is not None:
            out.setdefault(family_of(rule_cls), []).append(code)
    return out


def any_trigger(codes: Iterable[str]) -> re.Pattern:
    """One pattern matching wherever any selected family's triggers match."""
    key = frozenset(codes)
    pattern = _UNION.get(key)
    if pattern is None:
        sources = [s for family in _families(key) for s in family_triggers(family)]
        pattern = _UNION[key] = _compile(sources) if sources else re.compile(r"(?!)")
    return pattern


def active_codes(text: str, codes: Iterable[str]) -> set[str]:
    """The subset of `codes` whose family triggers occur in `text` (empty: skip the file)."""
    codes = set(codes)
    if not any_trigger(codes).search(text):
        return set()
    active: set[str] = set()
    for family, members in _families(codes).items():
        if family_pattern(family).search(text):
            active.update(members)
    return active
