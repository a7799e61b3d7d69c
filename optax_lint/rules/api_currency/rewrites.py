"""What the API-currency fixes write: a dotted name spelled from the file's imports, a
call rewritten by a table recipe, imports moved to another module."""

from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from optax_lint.facts.api_currency import CallRecipe
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.names import qualified_name
from optax_lint.syntax.nodes import node_code
from optax_lint.syntax.walker import Scope


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


def literal(value) -> cst.BaseExpression:
    if isinstance(value, bool):
        return cst.Name("True" if value else "False")
    if isinstance(value, int):
        return cst.Integer(str(value))
    if isinstance(value, float):
        return cst.Float(repr(value))
    return cst.SimpleString(f'"{value}"')


def as_keyword(arg: cst.Arg, name: str) -> cst.Arg:
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
            out.append(arg if position <= recipe.positional else as_keyword(arg, new))
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
        out.append(fixes.keyword_arg(name, literal(value)))
    return out


def _alias_local(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return node_code(alias.name)


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


def replace_pair(pair: Optional[tuple[cst.CSTNode, object]]) -> Optional[fixes.ModuleEdit]:
    return None if pair is None else fixes.replace(pair[0], pair[1])
