"""Reusable libcst edits for fixes. Each returns a function Module -> Module.

Edits replace nodes by identity (`deep_replace`), so everything else, comments and
formatting included, is left exactly as the user wrote it.
"""

from __future__ import annotations

from typing import Callable, Sequence

import libcst as cst

ModuleEdit = Callable[[cst.Module], cst.Module]


def replace(old: cst.CSTNode, new: cst.CSTNode) -> ModuleEdit:
    def apply(module: cst.Module) -> cst.Module:
        return module.deep_replace(old, new)

    return apply


def _trailing(comma) -> object:
    """The end-of-line part (comment + newline) of a comma's following whitespace."""
    if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        return comma.whitespace_after.first_line
    return None


def reorder_args(call: cst.Call, order: Sequence[int]) -> cst.Call:
    """Permute a call's arguments, keeping each slot's layout (commas, line breaks,
    indentation) in place while end-of-line comments travel with their argument."""
    args = list(call.args)
    new_args = []
    for slot, source in enumerate(order):
        slot_arg, moved = args[slot], args[source]
        comma = slot_arg.comma
        moved_trailing = _trailing(moved.comma)
        if moved_trailing is not None and isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
            comma = comma.with_changes(whitespace_after=comma.whitespace_after.with_changes(first_line=moved_trailing))
        if slot == len(args) - 1 and isinstance(comma, cst.MaybeSentinel) and not isinstance(moved.comma, cst.MaybeSentinel):
            comma = cst.MaybeSentinel.DEFAULT
        elif slot < len(args) - 1 and not isinstance(comma, cst.Comma):
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        new_args.append(moved.with_changes(comma=comma))
    return call.with_changes(args=new_args)


def move_arg_to_front(call: cst.Call, arg: cst.Arg) -> ModuleEdit:
    index = next(i for i, a in enumerate(call.args) if a is arg)
    order = [index] + [i for i in range(len(call.args)) if i != index]
    return replace(call, reorder_args(call, order))


def remove_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    args = list(call.args)
    index = next(i for i, a in enumerate(args) if a is arg)
    if index == len(args) - 1 and index > 0:
        # Keep the layout of the list's end: the new last argument takes the old last
        # comma's closing line, but keeps its own end-of-line comment.
        previous = args[index - 1]
        mine, theirs = previous.comma, arg.comma
        if (
            isinstance(mine, cst.Comma)
            and isinstance(mine.whitespace_after, cst.ParenthesizedWhitespace)
            and isinstance(theirs, cst.Comma)
            and isinstance(theirs.whitespace_after, cst.ParenthesizedWhitespace)
        ):
            comma = mine.with_changes(whitespace_after=mine.whitespace_after.with_changes(
                empty_lines=theirs.whitespace_after.empty_lines,
                indent=theirs.whitespace_after.indent,
                last_line=theirs.whitespace_after.last_line,
            ))
        else:
            comma = theirs
        args = args[: index - 1] + [previous.with_changes(comma=comma)]
    else:
        args.pop(index)
    return call.with_changes(args=args)


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def add_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """Append `name=value`, following the call's layout (one line or one per line)."""
    args = list(call.args)
    new = keyword_arg(name, value)
    if args:
        last = args[-1]
        if isinstance(last.comma, cst.Comma):
            new = new.with_changes(comma=last.comma)
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=_separator(call)))
        else:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(new)
    return call.with_changes(args=args)


def _separator(call: cst.Call):
    """The whitespace between two arguments of this call, without any comment."""
    for arg in call.args[:-1]:
        if isinstance(arg.comma, cst.Comma):
            ws = arg.comma.whitespace_after
            break
    else:
        ws = call.whitespace_before_args
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return ws.with_changes(first_line=cst.TrailingWhitespace())
    return cst.SimpleWhitespace(" ")
