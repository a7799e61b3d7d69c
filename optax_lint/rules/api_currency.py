"""API currency (OPX701-OPX704): names that break, or will break, on the installed
optax/flax/jax, judged from `rules/api_currency.toml` (generated from those libraries).

Severity per finding: a path that raises in the tabled versions (AttributeError,
ModuleNotFoundError, TypeError) is reported as an error whatever the catalogue's
default; a path that only warns is reported as a warning. The catalogue severity is
the rule's default as the issue defines it.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

import libcst as cst

from optax_lint.core.catalogue import load_table
from optax_lint.core.diagnostics import Applicability, Severity
from optax_lint.core.target_versions import missing_in_target
from optax_lint.facts.api_currency import (
    CallRecipe,
    CurrencyTable,
    Entry,
    Reference,
    currency_facts,
    model_name_at,
    nnx_constructions,
    nnx_rebound,
    optimizer_origin,
    table_for,
)
from optax_lint.facts.file_role import belongs_to, owning_package
from optax_lint.rules.base import Context, Rule, describe, register
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.names import qualified_name
from optax_lint.syntax.walker import Scope


def TRIGGERS() -> tuple[str, ...]:
    """Prefilter words (optax_lint/engine/prefilter.py), from the table these rules read: "optax",
    the last part of every other listed path (no reference to `jax.experimental.maps`
    can avoid spelling `maps`), and `Optimizer` for nnx.Optimizer's old call forms."""
    raw = load_table("api_currency")
    words = {"optax", r"\bOptimizer\b"}
    for path in raw.get("names", {}):
        if not path.startswith("optax"):
            words.add(rf"\b{re.escape(path.rsplit('.', 1)[-1])}\b")
    return tuple(sorted(words))

_TRIGGER = {
    "access": "on access",
    "import": "on import",
    "call": "when called",
}


# --- wording ---------------------------------------------------------------------------

def _exception(observed: str) -> str:
    return observed.split(":", 1)[0] if ":" in observed else observed


def state_text(entry: Entry, table: CurrencyTable) -> str:
    version = table.version_of(entry.path)
    if entry.status == "removed":
        return f"was removed ({_exception(entry.observed)} in {version})"
    if entry.trigger == "doc":
        since = f" since {entry.library} {entry.since}" if entry.since else ""
        return f"is deprecated{since} (documented; {version} does not warn)"
    return f"is deprecated (DeprecationWarning {_TRIGGER.get(entry.trigger, 'on use')}, {version})"


def advice_text(entry: Entry) -> str:
    if entry.hint:
        return entry.hint
    if entry.replacement and entry.call is not None and entry.call.add:
        extra = ", ".join(f"{k}={cst.Module([]).code_for_node(_literal(v))}" for k, v in entry.call.add.items())
        return f"use {entry.replacement}(..., {extra})"
    if entry.replacement:
        return f"use {entry.replacement}"
    return "it has no direct replacement"


def _severity(removed: bool) -> Severity:
    return Severity.ERROR if removed else Severity.WARNING


# --- expressions and fixes ------------------------------------------------------------------

def dotted_expr(path: str) -> cst.BaseExpression:
    parts = path.split(".")
    expr: cst.BaseExpression = cst.Name(parts[0])
    for part in parts[1:]:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr


def spell(qualname: str, scope: Scope) -> Optional[cst.BaseExpression]:
    """An expression for `qualname` built from an import visible at `scope`
    (`jax.lax.pmean` with `import jax`, `lax.pmean` with `from jax import lax`)."""
    best: Optional[tuple[str, str]] = None
    for candidate in scope.lookup_chain():
        for name, bindings in candidate.bindings.items():
            if len(bindings) != 1 or bindings[0].kind != "import" or bindings[0].qualname is None:
                continue
            bound = bindings[0].qualname
            if qualname != bound and not qualname.startswith(bound + "."):
                continue
            if qualname == bound and name != bound.rsplit(".", 1)[-1]:
                continue  # `from optax.tree import norm as global_norm`: not a readable spelling
            if qualified_name(cst.Name(name), scope) != bound:
                continue  # shadowed from here
            if best is None or len(bound) > len(best[1]):
                best = (name, bound)
    if best is None:
        return None
    name, bound = best
    rest = qualname[len(bound):].lstrip(".")
    return dotted_expr(f"{name}.{rest}" if rest else name)


def code_text(node: cst.CSTNode, limit: int = 60) -> str:
    """Source text of a node for messages, receiver included (`optimizer.update(grads)`)."""
    text = " ".join(cst.Module([]).code_for_node(node).split())
    if len(text) <= limit:
        return text
    if isinstance(node, cst.Call):
        return code_text(node.func, limit) + "(...)"
    return text[:limit] + "..."


def _literal(value) -> cst.BaseExpression:
    if isinstance(value, bool):
        return cst.Name("True" if value else "False")
    if isinstance(value, int):
        return cst.Integer(str(value))
    if isinstance(value, float):
        return cst.Float(repr(value))
    return cst.SimpleString(f'"{value}"')


def _as_keyword(arg: cst.Arg, name: str) -> cst.Arg:
    return arg.with_changes(
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def apply_recipe(args: Sequence[cst.Arg], recipe: CallRecipe) -> Optional[list[cst.Arg]]:
    """The arguments of the equivalent call of the replacement, or None when the
    call's arguments cannot be mapped safely (*args, **kwargs, unknown keywords)."""
    out: list[cst.Arg] = []
    given: set[str] = set()
    position = 0
    for arg in args:
        if arg.star:
            return None
        if arg.keyword is None:
            if position >= len(recipe.params):
                return None
            name = recipe.params[position]
            position += 1
            given.add(name)
            new = recipe.rename.get(name, name)
            out.append(arg if position <= recipe.positional else _as_keyword(arg, new))
            continue
        name = arg.keyword.value
        if name not in recipe.keywords:
            return None  # unknown here, or the replacement takes it under another name
        given.add(name)
        new = recipe.rename.get(name, name)
        out.append(arg if new == name else arg.with_changes(keyword=cst.Name(new)))
    for name, value in recipe.add.items():
        if name in given:
            return None  # the user overrides what the old name fixed: say nothing
        if out and isinstance(out[-1].comma, cst.MaybeSentinel):
            out[-1] = out[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        out.append(fixes.keyword_arg(name, _literal(value)))
    return out


def _alias_local(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return cst.Module([]).code_for_node(alias.name)


def _moved_alias(alias: cst.ImportAlias, new_name: str) -> cst.ImportAlias:
    local = _alias_local(alias)
    asname = None if local == new_name else cst.AsName(name=cst.Name(local))
    return alias.with_changes(name=cst.Name(new_name), asname=asname)


def rehome_imports(
    line: cst.SimpleStatementLine, node: cst.ImportFrom, moves: dict[int, str]
) -> Optional[tuple[cst.CSTNode, object]]:
    """Move aliases of `from a import x, y` to other modules. `moves` maps the index of
    an alias to the public dotted path of what it imports; the local names stay.
    Returns (node to replace, replacement) for `fixes.replace` / `fixes.rewrite_nodes`."""
    names = list(node.names)
    targets = {i: path.rsplit(".", 1) for i, path in moves.items()}
    if any(len(t) != 2 for t in targets.values()):
        return None
    modules = list(dict.fromkeys(t[0] for t in targets.values()))
    if len(moves) == len(names) and len(modules) == 1:
        # Everything moves to one module: edit in place (keeps parentheses, comments).
        new_names = [_moved_alias(a, targets[i][1]) for i, a in enumerate(names)]
        return node, node.with_changes(module=dotted_expr(modules[0]), names=new_names)
    remaining = [a for i, a in enumerate(names) if i not in moves]
    if not remaining and len(line.body) > 1:
        return None  # `import a; from b import c` lines: leave them to the user
    statements: list[cst.BaseStatement] = []
    if remaining:
        if (len(names) - 1) in moves:
            remaining[-1] = _new_last_alias(remaining[-1], names[-1], parenthesized=node.rpar is not None)
        reduced = node.with_changes(names=remaining)
        statements.append(line.with_changes(body=[reduced if s is node else s for s in line.body]))
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    for module in modules:
        aliases = [_moved_alias(a, targets[i][1]) for i, a in enumerate(names) if i in moves and targets[i][0] == module]
        aliases = [a.with_changes(comma=separator) for a in aliases[:-1]] + [aliases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
        new_import = cst.ImportFrom(module=dotted_expr(module), names=aliases)
        if not statements:
            statements.append(line.with_changes(body=[new_import]))  # keeps the line's comments
        else:
            statements.append(cst.SimpleStatementLine(body=[new_import]))
    return line, cst.FlattenSentinel(statements)


def _new_last_alias(alias: cst.ImportAlias, removed_last: cst.ImportAlias, *, parenthesized: bool) -> cst.ImportAlias:
    """The alias that becomes last when the last one moves away: it takes the old last
    comma's closing layout but keeps its own end-of-line comment."""
    if not parenthesized:
        return alias.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    mine, theirs = alias.comma, removed_last.comma
    if (
        isinstance(mine, cst.Comma)
        and isinstance(mine.whitespace_after, cst.ParenthesizedWhitespace)
        and isinstance(theirs, cst.Comma)
        and isinstance(theirs.whitespace_after, cst.ParenthesizedWhitespace)
    ):
        layout = theirs.whitespace_after.with_changes(first_line=mine.whitespace_after.first_line)
        return alias.with_changes(comma=mine.with_changes(whitespace_after=layout))
    return alias.with_changes(comma=theirs)


def _replace_pair(pair: Optional[tuple[cst.CSTNode, object]]) -> Optional[fixes.ModuleEdit]:
    return None if pair is None else fixes.replace(pair[0], pair[1])


# --- shared reporting of table references ------------------------------------------------------

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
        return _replace_pair(move)
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


def _gated(ctx: Context, fix, key: str, title: str) -> tuple[Optional[fixes.ModuleEdit], Optional[str], Optional[str]]:
    """(fix, fix title, help): no fix when the API it writes is newer than the target
    release (`target-versions`), with a help line that says so."""
    if fix is None:
        return None, None, None
    missing = missing_in_target(key, ctx.options.get("target_versions") or {})
    if missing is None:
        return fix, title, None
    return None, None, f"{title} when you no longer support older releases: {missing}"


def report_references(ctx: Context, code: str) -> None:
    facts = currency_facts(ctx.facts)
    table = table_for(ctx.facts)
    for ref in facts.references:
        entry = ref.entry
        if entry is None or entry.rule != code:
            continue
        fix, title, help_text = _gated(
            ctx, _reference_fix(ref, entry, ctx.facts.path), entry.replacement, f"Replace with {entry.replacement}"
        )
        finding = ctx.report(
            ref.node,
            subject=_spelled(ref),
            state=state_text(entry, table),
            advice=advice_text(entry),
            fix=fix,
            fix_title=title,
            applicability=Applicability.SAFE if fix is not None else None,
            help=help_text,
        )
        finding.severity = _severity(entry.status == "removed")


# --- rules -----------------------------------------------------------------------------------

@register
class DeprecatedOptaxApi(Rule):
    code = "OPX701"

    def check(self, ctx: Context) -> None:
        report_references(ctx, self.code)
        self._arguments(ctx)

    def _arguments(self, ctx: Context) -> None:
        facts = ctx.facts
        if belongs_to(facts.path, "optax"):
            return  # optax's own modules keep the old keywords working on purpose
        table = table_for(facts)
        for path, argument in sorted(table.arguments.items()):
            entry = facts.api.entry(path)
            for record in facts.calls_by_name.get(path, ()):
                call = record.node
                keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
                for old, new in argument.rename.items():
                    arg = keywords.get(old)
                    if arg is None:
                        continue
                    fix = None
                    positional = [a for a in call.args if a.keyword is None]
                    index = entry.params.index(new) if entry is not None and new in entry.params else None
                    if new not in keywords and not any(a.star for a in call.args) and index is not None and len(positional) <= index:
                        fix = fixes.replace(arg, arg.with_changes(keyword=cst.Name(new)))
                    fix, title, help_text = _gated(ctx, fix, f"{path}({new}=)", f"Rename {old}= to {new}=")
                    finding = ctx.report(
                        arg,
                        subject=f"{old}= in {code_text(call)}",
                        state=f"is deprecated (DeprecationWarning when called, {table.version_of(path)})",
                        advice=f"pass {new}= instead (the same value gives the same key)",
                        fix=fix,
                        fix_title=title,
                        help=help_text,
                    )
                    finding.severity = Severity.WARNING


@register
class PrivateOptaxImport(Rule):
    code = "OPX702"

    def check(self, ctx: Context) -> None:
        facts = currency_facts(ctx.facts)
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
    def _state(module: str, removed: str, table: CurrencyTable) -> str:
        if removed:
            return f"no longer exists ({_exception(removed)} in {table.version_of('optax')})"
        return "is private optax API, free to move between releases"

    def _attribute(self, ctx: Context, ref: Reference, table: CurrencyTable) -> None:
        target = ref.private
        module = ref.qualname.rsplit(".", 1)[0]
        new = spell(target.public, ref.scope) if import_safe(ctx.facts.path, target.public) else None
        fix = fixes.replace(ref.node, new) if new is not None else None
        finding = ctx.report(
            ref.node,
            subject=f"{code_text(ref.node)} ({ref.qualname})",
            state=f"reaches into {module}, which {self._state(module, target.removed_module, table)}",
            advice=f"use {target.public}" + (" (matched by name: the old module is gone)"
                                             if target.removed_module else ", the same object"),
            fix=fix,
            fix_title=f"Replace with {target.public}" if fix is not None else None,
            applicability=(Applicability.UNSAFE if target.removed_module else Applicability.SAFE) if fix is not None else None,
        )
        finding.severity = _severity(bool(target.removed_module))

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
        moves = {}
        for ref in refs:
            index = next(i for i, a in enumerate(node.names) if a is ref.node)
            moves[index] = ref.private.public
        fix = None
        if isinstance(first.statement, cst.SimpleStatementLine) and all(import_safe(ctx.facts.path, p) for p in moves.values()):
            fix = _replace_pair(rehome_imports(first.statement, node, moves))
        publics = ", ".join(dict.fromkeys(r.private.public for r in refs))
        finding = ctx.report(
            first.node,
            subject=f"`{code_text(node, 72)}`",  # the import exactly as written
            state=f"imports from {module}, which {self._state(module, removed, table)}",
            advice=f"use {publics}"
            + (" (matched by name: the old module is gone)" if removed else
               f", the same {'objects' if len(refs) > 1 else 'object'}"),
            fix=fix,
            fix_title=f"Import from the public API ({publics})" if fix is not None else None,
            applicability=(Applicability.UNSAFE if removed else Applicability.SAFE) if fix is not None else None,
        )
        finding.severity = _severity(bool(removed))


@register
class LegacyFlaxOptimizerApi(Rule):
    code = "OPX703"

    def check(self, ctx: Context) -> None:
        report_references(ctx, self.code)
        facts = ctx.facts
        table = table_for(facts)
        nnx = table.nnx
        if not nnx or belongs_to(facts.path, "flax") or nnx_rebound(facts):
            return
        version = table.version_of("flax")
        since = nnx.get("since", "")
        for record in nnx_constructions(facts):
            self._construction(ctx, record, version, since)
        seen: set[int] = set()
        for record in facts.raw.calls:
            call = record.node
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value != "update":
                continue
            positional = [a for a in call.args if a.keyword is None]
            if len(positional) != 1 or any(a.star for a in call.args):
                continue
            if optimizer_origin(facts, func.value, record.scope) is None:
                continue
            seen.add(id(call))
            model = model_name_at(facts, func.value, record.scope)
            fix = None
            if model is not None:
                new_first = cst.Arg(value=cst.Name(model), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                fix = fixes.replace(call, call.with_changes(args=[new_first, *call.args]))
            fix, title, help_text = _gated(ctx, fix, "flax.nnx.Optimizer.update(model, grads)", f"Pass {model} as the first argument")
            finding = ctx.report(
                call,
                subject=code_text(call),
                state=f"passes only the gradients (TypeError in {version}: nnx.Optimizer.update "
                      f"takes (model, grads) since flax {since})",
                advice=f"pass the model first: {code_text(func.value)}.update({model or 'model'}, grads)",
                fix=fix,
                fix_title=title,
                help=help_text,
            )
            finding.severity = Severity.ERROR
        for read in facts_model_reads(facts):
            if optimizer_origin(facts, read.node.value, read.scope) is None:
                continue
            finding = ctx.report(
                read.node,
                subject=code_text(read.node),
                state=f"does not exist (AttributeError in {version}: nnx.Optimizer keeps no model "
                      f"since flax {since})",
                advice="keep your own reference to the model, or build nnx.ModelAndOptimizer, "
                       "which still has .model",
            )
            finding.severity = Severity.ERROR

    def _construction(self, ctx: Context, record, version: str, since: str) -> None:
        call = record.node
        if any(a.star for a in call.args):
            return
        if any(a.keyword is not None and a.keyword.value == "wrt" for a in call.args):
            return
        positional = [a for a in call.args if a.keyword is None]
        fix = None
        advice = "pass wrt=nnx.Param, the default before flax 0.11, and update(model, grads)"
        if len(positional) == 3:
            fix = fixes.replace(positional[2], _as_keyword(positional[2], "wrt"))
            title = f"Pass {describe(positional[2].value)} as wrt="
            advice = f"pass the filter by keyword, wrt={describe(positional[2].value)}, and update(model, grads)"
        elif len(positional) <= 2:
            param = spell(table_for(ctx.facts).nnx.get("legacy_wrt_default", "flax.nnx.Param"), record.scope)
            if param is not None:
                fix = fixes.replace(call, fixes.add_keyword(call, "wrt", param))
                title = f"Add wrt={cst.Module([]).code_for_node(param)} (the pre-0.11 default)"
        else:
            return
        fix, title, help_text = _gated(ctx, fix, "flax.nnx.Optimizer(wrt=)", title if fix is not None else "")
        finding = ctx.report(
            call,
            subject=code_text(call),
            state=f"has no wrt= keyword (TypeError in {version}: wrt is required since flax {since})",
            advice=advice,
            fix=fix,
            fix_title=title,
            help=help_text,
        )
        finding.severity = Severity.ERROR


def facts_model_reads(facts):
    return currency_facts(facts).model_reads


@register
class RemovedJaxParallelApi(Rule):
    code = "OPX704"

    def check(self, ctx: Context) -> None:
        report_references(ctx, self.code)
