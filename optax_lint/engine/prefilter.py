"""Which rules can fire on a file, decided from its raw text before any parse.

Every rule family (a package under `optax_lint/rules/`) declares `TRIGGERS` in its
`__init__`: regular expressions such that a file matching none of them cannot give
that family a finding (the family resolves names such as `optax.adamw` or `jax.pmap`,
and a name cannot be resolved from text that never spells it). `TRIGGERS` is a tuple
of patterns, or a function returning one when the words come from a data table. A
file no selected family triggers on is only syntax-checked; a family whose triggers
miss is not run.

A code's family comes from the catalogue (rules/registry.py), and the family package
holds nothing but its TRIGGERS: prefiltering imports no rule, libcst or facts. A new
family without TRIGGERS fails the test that checks every family of the catalogue.
"""

from __future__ import annotations

import importlib
import re
from typing import Iterable, Optional

from optax_lint.rules import registry

_FAMILY_PATTERNS: dict[str, re.Pattern] = {}


def family_triggers(family: str) -> tuple[str, ...]:
    """The family package's TRIGGERS (`family` as in `optax_lint.rules.chain_order`) as a
    tuple of regex sources (KeyError when missing)."""
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


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = re.compile(r"\\[bBsSwWdDAZ]|\(\?[=!<][^)]*\)|\[[^\]]*\]")


def required_literal(source: str) -> Optional[str]:
    """A word every match of the regex `source` contains (its longest such), or None.
    `str.__contains__` finds it ~100x faster than the regex engine scans for an
    alternation with word boundaries, so the regex only runs where the word occurs."""
    branches, depth, start = [], 0, 0
    for i, ch in enumerate(source):
        if ch == "\\":
            continue
        if ch in "([" and (i == 0 or source[i - 1] != "\\"):
            depth += 1
        elif ch in ")]" and source[i - 1] != "\\":
            depth -= 1
        elif ch == "|" and depth == 0 and source[i - 1] != "\\":
            branches.append(source[start:i])
            start = i + 1
    branches.append(source[start:])
    common: Optional[set[str]] = None
    for branch in branches:
        branch = _without_alternating_groups(branch)
        words = set(_WORD.findall(_ESCAPES.sub(" ", branch).replace("\\", "")))
        common = words if common is None else common & words
    return max(sorted(common), key=len) if common else None


def _without_alternating_groups(branch: str) -> str:
    """Drop every (...) group holding a `|`: none of its words is required."""
    while True:
        stack, cut = [], None
        for i, ch in enumerate(branch):
            if i and branch[i - 1] == "\\":
                continue
            if ch == "(":
                stack.append(i)
            elif ch == ")" and stack:
                start = stack.pop()
                if "|" in branch[start:i]:
                    cut = (start, i + 1)
                    break
        if cut is None:
            return branch
        branch = branch[:cut[0]] + " " + branch[cut[1]:]


_CHECKS: dict[str, list] = {}  # family -> [(literal or None, compiled trigger)]


def _family_checks(family: str) -> list:
    checks = _CHECKS.get(family)
    if checks is None:
        checks = _CHECKS[family] = [(required_literal(t), re.compile(t)) for t in family_triggers(family)]
    return checks


def family_triggered(family: str, text: str) -> bool:
    for literal, pattern in _family_checks(family):
        if (literal is None or literal in text) and pattern.search(text):
            return True
    return False


def _families(codes: Iterable[str]) -> dict[str, list[str]]:
    """The rule codes among `codes` by family package; meta and unknown codes are left out."""
    packages = registry.family_packages()
    out: dict[str, list[str]] = {}
    for code in codes:
        package = packages.get(code)
        if package is not None:
            out.setdefault(package, []).append(code)
    return out


def families_of(codes: Iterable[str]) -> list[str]:
    """The family packages of the rule codes among `codes`."""
    return list(_families(set(codes)))


def active_codes(text: str, codes: Iterable[str]) -> set[str]:
    """The subset of `codes` whose family triggers occur in `text` (empty: skip the file)."""
    active: set[str] = set()
    for family, members in _families(set(codes)).items():
        if family_triggered(family, text):
            active.update(members)
    return active
