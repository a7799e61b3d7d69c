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
- Both branches of an `if` that asks which version of a library is installed
  (`flax.__version__`, `sys.version_info`, `version.parse(...)`, `Version(...)`,
  `inspect.signature(...)`, directly or through a module-level flag assigned from
  such a test) are written for one version each: the fallback for the old release
  is compatibility code, knowingly.

Blocks are found from the statement tree the walker records; line ranges are computed
only for files that have findings.
"""

from __future__ import annotations

import libcst as cst

from optax_lint.syntax.nodes import last_name

_RAISES = frozenset({"assertRaises", "assertRaisesRegex", "assertRaisesRegexp", "assertRaisesWithLiteralMatch", "raises"})
_GUARD_ERRORS = frozenset({"AttributeError", "ImportError", "ModuleNotFoundError"})
# Spellings of a test that asks which library version (or which signature) is installed.
_VERSION_MARKERS = ("__version__", "version_info", "version.parse", "Version(", "parse_version(", "inspect.signature(", "signature(")


def _expects_error(node: cst.CSTNode) -> bool:
    if not isinstance(node, cst.With):
        return False
    return any(isinstance(item.item, cst.Call) and last_name(item.item.func) in _RAISES for item in node.items)


def _enclosing_test(node: cst.CSTNode, parent_stmt: dict):
    """The `test*` function the statement sits in, or None."""
    seen = 0
    while node is not None and seen < 200:  # nesting is bounded; the guard is for cycles
        if isinstance(node, cst.FunctionDef):
            return node if node.name.value.startswith("test") else None
        node = parent_stmt.get(node)
        seen += 1
    return None


def _module_flags(module: cst.Module) -> dict[str, cst.BaseExpression]:
    """`NAME = expr` statements at module level, for flags such as `NEW_API = ... >= ...`."""
    flags: dict[str, cst.BaseExpression] = {}
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                    flags[small.targets[0].target.value] = small.value
    return flags


def _asks_version(test: cst.BaseExpression, module: cst.Module, flags: dict) -> bool:
    """The `if` test compares library versions or inspects a signature."""
    while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    if isinstance(test, cst.Name) and test.value in flags:
        test = flags[test.value]
    code = module.code_for_node(test)
    return any(marker in code for marker in _VERSION_MARKERS)


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
    asks_version = "version" in text or "signature(" in text
    if "raises" not in text.lower() and "hasattr" not in text and "except" not in text and not asks_version:
        return [], []
    owners = set(f.raw.parent_stmt.values())
    flags = _module_flags(f.module) if asks_version else {}
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
        elif asks_version and isinstance(node, cst.If) and _asks_version(node.test, f.module, flags):
            span = f.positions.span(node)  # both branches, and any elif/else
            guarded.append((span.line, span.end_line))
    return raising, guarded
