"""OPX702 private-optax-import: An import from `optax._src` (or another private optax
module) of an object optax exports publicly."""

from __future__ import annotations

import libcst as cst

from optax_lint.core.diagnostics import Applicability, Severity
from optax_lint.facts.api_currency import CurrencyTable, Reference, table_for
from optax_lint.core.catalogue import load_table
from optax_lint.core.target_versions import version_tuple
from optax_lint.rules.api_currency.references import import_safe, older_target
from optax_lint.rules.api_currency.rewrites import rehome_imports, replace_pair, spell
from optax_lint.rules.api_currency.wording import code_text, exception_name, severity
from optax_lint.rules.base import Context, Rule
from optax_lint.syntax import edits as fixes


class PrivateOptaxImport(Rule):
    code = "OPX702"

    def check(self, ctx: Context) -> None:
        facts = ctx.facts.currency
        table = table_for(ctx.facts)
        by_statement: dict[int, list[Reference]] = {}
        for ref in facts.references:
            if ref.private is None:
                continue
            if ref.kind == "import_from":
                by_statement.setdefault(id(ref.import_node), []).append(ref)
            elif ref.kind == "attribute":
                self._attribute(ctx, ref, table)
            else:
                self._module_import(ctx, ref, table)
        for refs in by_statement.values():
            self._import_from(ctx, refs, table)

    @staticmethod
    def _state(module: str, removed: str, table: CurrencyTable, missing: tuple[str, ...] = (),
               error: str = "ImportError") -> str:
        if removed:
            return f"no longer exists ({exception_name(removed)} in {table.version_of('optax')})"
        if missing:
            names = ", ".join(missing)
            return f"no longer defines {names} ({error} in {table.version_of('optax')})"
        return "is private optax API, free to move between releases"

    @staticmethod
    def _advice(target_publics: str, removed: bool, missing: bool, many: bool) -> str:
        if removed:
            return f"use {target_publics} (matched by name: the old module is gone)"
        if missing:
            return f"use {target_publics} (matched by name: the public name it moved to)"
        return f"use {target_publics}, the same {'objects' if many else 'object'}"

    def _attribute(self, ctx: Context, ref: Reference, table: CurrencyTable) -> None:
        target = ref.private
        module = ref.qualname.rsplit(".", 1)[0]
        new = spell(target.public, ref.scope) if import_safe(ctx.facts.path, target.public) else None
        fix = fixes.replace(ref.node, new) if new is not None else None
        leaf = ref.qualname.rsplit(".", 1)[1]
        missing = (leaf,) if target.missing_name else ()
        state = f"reaches into {module}, which {self._state(module, target.removed_module, table, missing, 'AttributeError')}"
        advice = self._advice(target.public, bool(target.removed_module), target.missing_name, False)
        older = _older_than_removal(ctx, module, () if target.removed_module else missing) if (target.removed_module or missing) else None
        if older is not None:
            release, when = older
            gone = f"is gone from optax {release}" if target.removed_module else f"no longer defines {leaf} from optax {release}"
            state = f"reaches into {module}, which {gone}; {when}, which still {'has it' if target.removed_module else 'does'}"
            advice = f"when you upgrade past it, {advice}"
        finding = ctx.report(
            ref.node,
            subject=f"{code_text(ref.node)} ({ref.qualname})",
            state=state,
            advice=advice,
            fix=fix,
            fix_title=f"Replace with {target.public}" if fix is not None else None,
            applicability=(Applicability.UNSAFE if target.removed_module else Applicability.SAFE) if fix is not None else None,
        )
        # A missing name fails like a missing module; the public name it moved to is the
        # one a working program spells, so its fix stays safe.
        finding.severity = severity(bool(target.removed_module) or target.missing_name, older[1] if older is not None else None)

    def _module_import(self, ctx: Context, ref: Reference, table: CurrencyTable) -> None:
        finding = ctx.report(
            ref.node,
            subject=f"import {ref.qualname}",
            state=f"fails: {ref.qualname} {self._state(ref.qualname, ref.private.removed_module, table)}",
            advice="import the names it held from the public optax API",
        )
        finding.severity = Severity.ERROR

    def _import_from(self, ctx: Context, refs: list[Reference], table: CurrencyTable) -> None:
        first = refs[0]
        node = first.import_node
        module = first.qualname.rsplit(".", 1)[0]
        removed = next((r.private.removed_module for r in refs if r.private.removed_module), "")
        missing = tuple(r.qualname.rsplit(".", 1)[1] for r in refs if r.private.missing_name)
        moves = {}
        for ref in refs:
            index = next(i for i, a in enumerate(node.names) if a is ref.node)
            moves[index] = ref.private.public
        fix = None
        if isinstance(first.statement, cst.SimpleStatementLine) and all(import_safe(ctx.facts.path, p) for p in moves.values()):
            fix = replace_pair(rehome_imports(first.statement, node, moves))
        publics = ", ".join(dict.fromkeys(r.private.public for r in refs))
        state = f"imports from {module}, which {self._state(module, removed, table, missing)}"
        advice = self._advice(publics, bool(removed), bool(missing), len(refs) > 1)
        older = _older_than_removal(ctx, module, () if removed else missing)
        if older is not None:
            release, target = older
            gone = f"is gone from optax {release}" if removed else f"no longer defines {', '.join(missing)} from optax {release}"
            state = f"imports from {module}, which {gone}; {target}, which still {'has it' if removed else 'does'}"
            advice = f"when you upgrade past it, {advice}"
        finding = ctx.report(
            first.node,
            subject=f"`{code_text(node, 72)}`",  # the import exactly as written
            state=state,
            advice=advice,
            fix=fix,
            fix_title=f"Import from the public API ({publics})" if fix is not None else None,
            applicability=(Applicability.UNSAFE if removed else Applicability.SAFE) if fix is not None else None,
        )
        finding.severity = severity(bool(removed) or bool(missing), older[1] if older is not None else None)


def _older_than_removal(ctx: Context, module: str, missing: tuple[str, ...]):
    """(release, target phrase) when the removal release of the module (no `missing`
    names) or of every missing name is recorded ([private_removed]) and the release the
    project targets predates it: the import works there, and fails only on upgrade."""
    removed_in = load_table("api_currency").get("private_removed", {})
    releases = [removed_in.get(f"{module}.{name}") for name in missing] if missing else [removed_in.get(module)]
    if not all(releases):
        return None
    release = min(releases, key=version_tuple)
    target = older_target(ctx, "optax", release)
    return (release, target) if target is not None else None
