"""The table's references reported as findings (OPX701, OPX703, OPX704), with a fix where
the replacement is safe to import from this file and exists in the target versions."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.core.diagnostics import Applicability, Severity
from optax_lint.core.target_versions import missing_in_target, predating_target
from optax_lint.facts.api_currency import Entry, Reference, table_for
from optax_lint.facts.file_role import owning_package
from optax_lint.rules.api_currency.rewrites import (
    apply_recipe,
    rehome_imports,
    replace_pair,
    spell,
)
from optax_lint.rules.api_currency.wording import (
    advice_text,
    code_text,
    exception_name,
    severity,
    state_text,
    upgrade_advice,
)
from optax_lint.rules.base import Context
from optax_lint.syntax import edits as fixes


def import_safe(path: Optional[str], target: str) -> bool:
    """A fix may point a module at `target` only when `target` lies outside the
    package the module belongs to: inside it, the package's `__init__` may import this
    very module, and the rewritten import would be circular."""
    own = owning_package(path)
    return own is None or target.split(".", 1)[0] != own


def _reference_fix(ref: Reference, entry: Entry, path: Optional[str] = None) -> Optional[fixes.ModuleEdit]:
    if entry.fix == "none" or not entry.replacement or not import_safe(path, entry.replacement):
        return None
    if ref.kind == "import_from":
        return _import_fix(ref, entry)
    if ref.kind != "attribute":
        return None
    new = spell(entry.replacement, ref.scope)
    if new is None:
        return None
    if entry.fix == "rename":
        return fixes.replace(ref.node, new)
    recipe = entry.call
    if recipe is None:
        return None
    if ref.call is not None:
        args = apply_recipe(ref.call.args, recipe)
        return None if args is None else fixes.replace(ref.call, ref.call.with_changes(func=new, args=args))
    if ref.partial is not None:
        rest = apply_recipe(ref.partial.args[1:], recipe)
        if rest is None:
            return None
        first = ref.partial.args[0].with_changes(value=new)
        return fixes.replace(ref.partial, ref.partial.with_changes(args=[first, *rest]))
    return None


def _import_fix(ref: Reference, entry: Entry) -> Optional[fixes.ModuleEdit]:
    node = ref.import_node
    if not isinstance(node, cst.ImportFrom) or not isinstance(ref.statement, cst.SimpleStatementLine):
        return None
    index = next(i for i, a in enumerate(node.names) if a is ref.node)
    move = rehome_imports(ref.statement, node, {index: entry.replacement})
    if move is None:
        return None
    if entry.fix == "rename":
        return replace_pair(move)
    # A call recipe: every use must be a call (or functools.partial) we can rewrite.
    recipe = entry.call
    if recipe is None or not ref.uses_complete:
        return None
    new_import = move[1]
    edits: list[tuple[cst.CSTNode, object]] = [(move[0], lambda _updated: new_import)]
    for use in ref.uses:
        if use.call is not None:
            if apply_recipe(use.call.args, recipe) is None:
                return None
            edits.append((use.call, lambda u: u.with_changes(args=apply_recipe(u.args, recipe))))
        elif use.partial is not None:
            if apply_recipe(use.partial.args[1:], recipe) is None:
                return None
            edits.append((use.partial, lambda u: u.with_changes(args=[u.args[0], *apply_recipe(u.args[1:], recipe)])))
        else:
            return None  # passed around as a value: its later calls are unknown
    return fixes.rewrite_nodes(edits)


def _spelled(ref: Reference) -> str:
    if ref.kind == "attribute":
        text = code_text(ref.node)
        return text if text == ref.qualname else f"{text} ({ref.qualname})"
    if ref.kind == "import_from" and isinstance(ref.import_node, cst.ImportFrom):
        return f"{ref.qualname} (imported as {ref.local})" if ref.local != ref.qualname.rsplit('.', 1)[-1] else ref.qualname
    return ref.qualname


def gated(ctx: Context, fix, key: str, title: str) -> tuple[Optional[fixes.ModuleEdit], Optional[str], Optional[str]]:
    """(fix, fix title, help): no fix when the API it writes is newer than the target
    release (`target-versions`), with a help line that says so."""
    if fix is None:
        return None, None, None
    missing = missing_in_target(key, ctx.options.get("target_versions") or {}, ctx.facts.declared_pins)
    if missing is None:
        return fix, title, None
    return None, None, f"{title} when you no longer support older releases: {missing}"


def older_target(ctx: Context, library: str, version: str) -> Optional[str]:
    """A phrase naming the code's target release when it predates `version`, the release
    an API broke in (`target-versions`, else the project's own dependency pins, else the
    installed release): there the finding is a migration note, not a crash."""
    if not version:
        return None
    return predating_target(library, version, ctx.options.get("target_versions") or {}, ctx.facts.declared_pins)


_REMOVED_IN = re.compile(r"removed (?:in|for) (?:[a-z]+ )?(\d+(?:\.\d+)+)")
_DEPRECATED_IN = re.compile(r"deprecated in (?:[a-z]+ )?(\d+(?:\.\d+)+)")


def removal_version(entry: Entry) -> str:
    """The release an entry's API was removed in, when the table records it."""
    match = _REMOVED_IN.search(entry.since or "")
    return match.group(1) if match else ""


def deprecation_version(entry: Entry) -> str:
    """The release that started warning about an entry's API, when the table records it."""
    match = _DEPRECATED_IN.search(entry.since or "")
    return match.group(1) if match else ""


def report_references(ctx: Context, code: str) -> None:
    facts = ctx.facts.currency
    table = table_for(ctx.facts)
    for ref in facts.references:
        entry = ref.entry
        if entry is None or entry.rule != code:
            continue
        fix, title, help_text = gated(
            ctx, _reference_fix(ref, entry, ctx.facts.path), entry.replacement, f"Replace with {entry.replacement}"
        )
        state, older, lacking = state_text(entry, table), None, None
        if entry.status == "removed":
            removed_in = removal_version(entry)
            older = older_target(ctx, entry.library, removed_in)
            if older is not None:
                state = (f"is removed from {entry.library} {removed_in} ({exception_name(entry.observed)} there); "
                         f"{older}, which still has it")
        else:
            # Deprecated after the release the project targets, or with a replacement that
            # release lacks: a note for the upgrade.
            deprecated_in = deprecation_version(entry)
            before = older_target(ctx, entry.library, deprecated_in) if deprecated_in else None
            if before is not None:
                state = f"is deprecated from {entry.library} {deprecated_in}; {before}, which does not warn"
                older = lacking = before
            elif entry.replacement:
                lacking = missing_in_target(entry.replacement, ctx.options.get("target_versions") or {}, ctx.facts.declared_pins)
                if lacking is not None:
                    state = f"{state}, but {entry.replacement} {lacking.removeprefix('it ')}"
                    older = lacking
        finding = ctx.report(
            ref.node,
            subject=_spelled(ref),
            state=state,
            advice=upgrade_advice(advice_text(entry), older),
            fix=fix,
            fix_title=title,
            applicability=Applicability.SAFE if fix is not None else None,
            help=help_text,
        )
        finding.severity = Severity.INFO if lacking is not None else severity(entry.status == "removed", older)
