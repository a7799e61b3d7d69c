"""Code written to fail, or guarded against a library version (the facts; which rules
stay silent there is the catalogue's to say, applied by engine/filters.py).

- Inside `with self.assertRaises(...)`, `assertRaisesRegex`, `pytest.raises(...)`, a
  test calls optax wrongly on purpose (`warmup_cosine_decay_schedule(..., 0)`,
  `adamw.update` without params). So does the part of a `test*` function before such
  a block: the wrong object is often built a line before the call that must raise
  (`tx = multi_transform(..., bad_labels)` then
  `with self.assertRaises(ValueError): tx.init(params)`).
- Under `if hasattr(jax, "device_put_replicated"):` or in a `try:` whose handler catches
  AttributeError / ImportError, code reaches for an API that may be gone, knowingly.

Blocks are found from the statement tree the walker records; line ranges are computed
only for files that have findings.
"""

from __future__ import annotations

import libcst as cst

_RAISES = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "assertRaisesWithLiteralMatch", "raises"})
_GUARD_ERRORS = frozenset({"AttributeError", "ImportError", "ModuleNotFoundError"})


def _last(func: cst.BaseExpression) -> str:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else ""


def _expects_error(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.With):
        return False
    return any(isinstance(item.item, cst.Call) and _last(item.item.func) in _RAISES for item in node.items)


def _enclosing_test(node: cst.CSTNode, parent_stmt: dict):
    """The `test*` function the statement sits in, or None."""
    seen = 0
    while node is not None and seen < 200:  # nesting is bounded; the guard is for cycles
        if isinstance(node, cst.FunctionDef):
            return node if node.name.value.startswith("test") else None
        node = parent_stmt.get(node)
        seen += 1
    return None


def _version_guard(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.If):
        test = node.test
        return isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "hasattr"
    if isinstance(node, cst.Try):
        for handler in node.handlers:
            kinds = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type] if handler.type is not None else []
            for kind in kinds:
                value = kind.value if isinstance(kind, cst.Element) else kind
                if isinstance(value, cst.Name) and value.value in _GUARD_ERRORS:
                    return True
    return False


def intended_blocks(f) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(line ranges expecting an error, line ranges guarded against a version)."""
    text = f.text or ""
    if "raises" not in text.lower() and "hasattr" not in text and "except" not in text:
        return [], []
    owners = set(f.raw.parent_stmt.values())
    raising, guarded = [], []
    for node in owners:
        if _expects_error(node):
            span = f.positions.span(node)
            test = _enclosing_test(node, f.raw.parent_stmt)
            start = f.positions.span(test).line if test is not None else span.line
            raising.append((start, span.end_line))  # code after the block is judged as usual
        elif _version_guard(node):
            body = node.body
            span = f.positions.span(body)
            guarded.append((span.line, span.end_line))
    return raising, guarded
