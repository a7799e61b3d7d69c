"""A call's positional arguments, and a keyword argument by name."""

from __future__ import annotations

from typing import Optional

import libcst as cst


def positional_args(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def keyword_arg(call: cst.Call, name: str) -> Optional[cst.Arg]:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)
