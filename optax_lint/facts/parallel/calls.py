"""Reading a call's arguments, and a node's code on one line (for messages)."""

from __future__ import annotations

from typing import Optional

import libcst as cst


def positional_args(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def keyword_arg(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def call_arg(call: cst.Call, position: Optional[int], keyword: str) -> Optional[cst.Arg]:
    arg = keyword_arg(call, keyword)
    if arg is not None or position is None:
        return arg
    positional = positional_args(call)
    return positional[position] if position < len(positional) else None

