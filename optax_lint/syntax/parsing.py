"""Parsing a source text: CPython's parser first (cheap, linear, and final on nesting
libcst would take superlinear time over), then libcst; syntax errors and the engine's
own codes as findings."""

from __future__ import annotations

import ast
import re
import warnings
from typing import TYPE_CHECKING, Optional

from optax_lint.core.diagnostics import Finding
from optax_lint.core.meta import SYNTAX_ERROR, meta_finding

if TYPE_CHECKING:
    import libcst as cst

# libcst (~0.25 s to import) is imported by `parse` on first use: a pre-commit run over
# files the prefilter rules out only needs CPython's parser (engine/skipped.py).

_CST_AT = re.compile(r"error at (\d+):(\d+)")


def parse_ast(text: str) -> ast.Module:
    """`ast.parse`, quietly (no SyntaxWarnings about the user's code)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def first_line(node: ast.stmt) -> int:
    """An `ast` statement's first line in the file: its first decorator's, if any."""
    decorators = getattr(node, "decorator_list", None)
    return min([node.lineno] + [d.lineno for d in decorators]) if decorators else node.lineno


def parse_module(text: str) -> "cst.Module":
    """`libcst.parse_module` without validating each node as it is built. libcst checks
    every node in its constructor (`CSTNode.__post_init__`), a guard for trees built by
    hand; the parser's own output is valid by construction (the same tree comes out,
    checked on the real-repository corpus), and the callers have had the text accepted
    by CPython's parser first. Skipping the checks saves ~11% of the parse. Once the
    process has parsed enough text, the node classes also get cheaper inits for the
    call (fast_nodes.py: another ~15%). Nodes built by hand (fixes) are still built and
    validated as libcst does: both changes last only as long as this call."""
    import libcst as cst
    from libcst._nodes.base import CSTNode

    from optax_lint.syntax import fast_nodes

    global _LIBCST_POST_INIT
    inits = fast_nodes.for_parse(len(text))
    validate = CSTNode.__post_init__
    if _LIBCST_POST_INIT is None and validate is not _built_by_the_parser:
        _LIBCST_POST_INIT = validate
    CSTNode.__post_init__ = _built_by_the_parser  # type: ignore[method-assign]
    if inits is not None:
        inits.install()
    try:
        return cst.parse_module(text)
    finally:
        if inits is not None:
            inits.remove()
        CSTNode.__post_init__ = validate  # type: ignore[method-assign]


def _built_by_the_parser(self) -> None:
    pass


# libcst's own node check, kept from the first parse: restore_node_classes puts it back.
_LIBCST_POST_INIT = None


def restore_node_classes() -> None:
    """Put libcst's node classes back as libcst defines them. parse_module swaps their
    check and inits for the parse and restores them in a `finally`; an exception raised
    inside that `finally` (the file budget's alarm, run/budget.py) would skip the
    restore, and hand-built nodes (fixes) would then go unchecked for the rest of the
    process."""
    if _LIBCST_POST_INIT is None:
        return  # nothing was ever swapped
    from libcst._nodes.base import CSTNode

    from optax_lint.syntax import fast_nodes

    CSTNode.__post_init__ = _LIBCST_POST_INIT  # type: ignore[method-assign]
    fast_nodes.remove_installed()


def parse(text: str, path: str) -> "tuple[Optional[cst.Module], Optional[Finding]]":
    import libcst as cst

    try:
        return parse_module(text), None
    except cst.ParserSyntaxError as exc:
        message = str(exc.message if hasattr(exc, "message") else exc).strip().splitlines()[0]
        at = _CST_AT.search(message)  # "parser error: error at 3:4: ..." (0-based column) is exact
        line, column = (int(at[1]), int(at[2]) + 1) if at else (exc.raw_line, exc.raw_column + 1)
        return None, meta_finding(SYNTAX_ERROR, path, f"SyntaxError: {message}", line, column)
    except RecursionError:
        return None, meta_finding(SYNTAX_ERROR, path, "SyntaxError: the file is too deeply nested to parse")
    except (MemoryError, ValueError, TypeError) as exc:
        return None, meta_finding(SYNTAX_ERROR, path, f"SyntaxError: cannot parse: {exc}")


# Limits every CPython version enforces. libcst would accept deeper input, but its parse
# time grows superlinearly with nesting depth (a 1000-deep `[[[...]]]` costs ~4 s, a
# 200,000-term `1+1+...` line never finishes), so these verdicts are final.
_CPYTHON_LIMITS = (
    "too many nested parentheses",
    "too many levels of indentation",
    "too many statically nested blocks",
    "too deeply nested",
    "too complex",
)


CpythonParse = tuple[Optional[ast.Module], Optional[Finding], bool]


def cpython_parse(text: str, path: str) -> CpythonParse:
    """CPython's own parser first (~0.15x the libcst parse, linear time): returns
    (tree or None, syntax-error finding or None, final). `final` means libcst must not
    be tried: nesting beyond CPython's limits. Other errors may be syntax newer than the
    running interpreter, which libcst decides; when libcst fails too, CPython's message
    and position are the ones to report (libcst puts tokenizer errors at 1:1). The tree
    serves the source positions of the same text (positions.py)."""
    try:
        return parse_ast(text), None, False
    except (RecursionError, MemoryError) as exc:  # 3.11: "Parser stack overflowed", AST depth
        detail = f"the file is too deeply nested to parse ({type(exc).__name__}: {exc})"
        return None, meta_finding(SYNTAX_ERROR, path, f"SyntaxError: {detail}"), True
    except SyntaxError as exc:
        message = (exc.msg or "invalid syntax").strip().splitlines()[0]
        final = any(limit in message for limit in _CPYTHON_LIMITS)
        line, column = max(exc.lineno or 1, 1), max(exc.offset or 1, 1)
        return None, meta_finding(SYNTAX_ERROR, path, f"SyntaxError: {message}", line, column), final
    except ValueError as exc:  # e.g. NUL bytes (read_source rejects binary files first)
        return None, meta_finding(SYNTAX_ERROR, path, f"SyntaxError: {exc}"), True


def cpython_check(text: str, path: str) -> tuple[Optional[Finding], bool]:
    """cpython_parse without the tree: (syntax-error finding or None, final)."""
    return cpython_parse(text, path)[1:]


def quick_syntax_check(text: str, path: str, parsed: Optional[CpythonParse] = None) -> Optional[Finding]:
    """Syntax check for files no rule looks at: CPython's parser (`parsed`, when the
    caller has it), confirmed by libcst (which knows newer syntax than the running
    interpreter may)."""
    _, error, final = parsed or cpython_parse(text, path)
    if error is None or final:
        return error
    module, cst_error = parse(text, path)
    return None if module is not None else better_syntax_error(error, cst_error)


def better_syntax_error(cpython_error: Optional[Finding], cst_error: Optional[Finding]) -> Optional[Finding]:
    """Both parsers refused the file. CPython's message and position are better (libcst
    puts tokenizer errors at 1:1), unless CPython may have stopped at syntax newer than
    itself (`type X = ...` on 3.11 is "invalid syntax") and libcst's parser got further."""
    if cpython_error is None or cst_error is None:
        return cpython_error or cst_error
    newer = cpython_error.message.removeprefix("SyntaxError: ") in _NEWER_SYNTAX_MESSAGES
    if newer and cst_error.message.startswith("SyntaxError: parser error") and cst_error.span.line > cpython_error.span.line:
        return cst_error
    return cpython_error


# What CPython 3.10/3.11 say about 3.12-3.14 syntax (PEP 695/696 generics and aliases,
# PEP 701 f-strings, PEP 750 t-strings, PEP 758 except lists).
_NEWER_SYNTAX_MESSAGES = frozenset(
    {"invalid syntax", "expected '('", "f-string: expecting '}'", "multiple exception types must be parenthesized"}
)
