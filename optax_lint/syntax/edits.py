"""Reusable libcst edits for fixes. Each returns a function Module -> Module.

Edits replace nodes by identity (`deep_replace`), so everything else, comments and
formatting included, is left exactly as the user wrote it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Optional, Sequence

import libcst as cst

from optax_lint.syntax.nodes import node_code

ModuleEdit = Callable[[cst.Module], cst.Module]


class CodeMemo:
    """What one fix round computes about its modules, by identity: their code and which
    top-level statement holds a node. Each candidate fix of a round compares its result
    with the round's module; a module's code is put together from its statements' code,
    each generated once, so a candidate that changed one statement of a large file costs
    that statement's codegen, not the file's (libcst's codegen of a module costs about as
    much as its parse)."""

    def __init__(self) -> None:
        self._codes: dict[int, tuple[cst.Module, str]] = {}  # the module is kept: its id stays its own
        self._statements: dict[int, tuple[cst.CSTNode, str]] = {}
        self._owners: Optional[_Owners] = None

    def code(self, module: cst.Module) -> str:
        hit = self._codes.get(id(module))
        if hit is None or hit[0] is not module:
            hit = self._codes[id(module)] = (module, self._assemble(module))
        return hit[1]

    def _assemble(self, module: cst.Module) -> str:
        """`module.code`, from the statements' cached code (Module._codegen_impl: header,
        body, footer; a module without its trailing newline is generated whole)."""
        if not module.has_trailing_newline or not module.body:
            return module.code
        parts = [module.code_for_node(line) for line in module.header]
        key_format = (module.default_indent, module.default_newline)
        for statement in module.body:
            hit = self._statements.get(id(statement))
            if hit is None or hit[0] is not statement or hit[1][0] != key_format:
                hit = self._statements[id(statement)] = (statement, (key_format, module.code_for_node(statement)))
            parts.append(hit[1][1])
        parts.extend(module.code_for_node(line) for line in module.footer)
        return "".join(parts)

    def changed_code(self, old: cst.Module, new: cst.Module) -> list[str]:
        """The code of each top-level statement of `new` that is not one of `old`'s (a
        candidate fix's statements; `code(new)` generated them already)."""
        kept = {id(statement) for statement in old.body}
        self.code(new)
        return [self._statements[id(s)][1][1] for s in new.body if id(s) not in kept and id(s) in self._statements]

    def owners(self, module: cst.Module) -> "_Owners":
        if self._owners is None or self._owners.module is not module:
            self._owners = _Owners(module)
        return self._owners


class _Owners:
    """Which top-level statement of `module` holds a node: the statements are walked one
    at a time, in order, only until the node is found, and remembered for the next
    question about the same module (every candidate fix of a round asks)."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.owner: dict[int, int] = {}
        self.mapped = 0

    def of(self, node: cst.CSTNode) -> Optional[int]:
        key = id(node)
        found = self.owner.get(key)
        body = self.module.body
        while found is None and self.mapped < len(body):
            index = self.mapped
            stack = [body[index]]
            while stack:
                current = stack.pop()
                self.owner[id(current)] = index
                stack.extend(_all_children(current))
            self.mapped += 1
            found = self.owner.get(key)
        return found


def replace(old: cst.CSTNode, new: cst.CSTNode) -> ModuleEdit:
    def apply(module: cst.Module, memo: Optional[CodeMemo] = None) -> cst.Module:
        # (A statement replaced whole may become several: deep_replace cannot return those at its root.)
        local = _in_statements(module, [old], lambda statement: new if statement is old else statement.deep_replace(old, new), memo)
        return local if local is not None else module.deep_replace(old, new)

    apply.shares_codegen = True  # type: ignore[attr-defined]
    return apply


def _in_statements(module: cst.Module, targets: Sequence[cst.CSTNode], edit: Callable, memo: Optional[CodeMemo] = None) -> Optional[cst.Module]:
    """`module` with `edit` applied to each top-level statement that holds one of
    `targets` (its result may be a statement, a FlattenSentinel or a RemovalSentinel),
    the other statements kept as they are; None when a target lies outside every
    statement. libcst's own transforms rebuild every node of the module, which on a
    large file costs more than its parse, once per fix."""
    owners = memo.owners(module) if memo is not None else _Owners(module)
    holding: set[int] = set()
    for node in targets:
        index = owners.of(node)
        if index is None:
            return None
        holding.add(index)
    body = list(module.body)
    for index in sorted(holding, reverse=True):
        result = edit(body[index])
        if isinstance(result, cst.FlattenSentinel):
            body[index:index + 1] = list(result.nodes)
        elif isinstance(result, cst.RemovalSentinel):
            del body[index]
        else:
            body[index] = result
    return module.with_changes(body=body)


@functools.lru_cache(maxsize=None)
def _field_names(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind))


def _all_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """Every child node, whitespace and punctuation included (any of them may be a target)."""
    out = []
    for name in _field_names(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            out.append(value)
        elif type(value) is tuple or type(value) is list:
            out.extend(item for item in value if isinstance(item, cst.CSTNode))
    return out


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
    return call.with_changes(args=_appended(call, list(call.args), keyword_arg(name, value)))


def _appended(call: cst.Call, args: list[cst.Arg], new: cst.Arg) -> list[cst.Arg]:
    """`args` with `new` last: a trailing comma moves to it, and the argument before it
    gets the separator the call uses (a space, or a line break in a one-per-line call)."""
    if args:
        last = args[-1]
        if isinstance(last.comma, cst.Comma):
            new = new.with_changes(comma=last.comma)
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=_separator(call)))
        else:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return [*args, new]


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


def add_dict_element(node: cst.Dict, key: cst.BaseExpression, value: cst.BaseExpression) -> cst.Dict:
    """Append `key: value` to a dict literal, following its layout (one line or one
    entry per line); the last entry keeps its end-of-line comment."""
    elements = list(node.elements)
    new = cst.DictElement(
        key=key,
        value=value,
        whitespace_before_colon=cst.SimpleWhitespace(""),
        whitespace_after_colon=cst.SimpleWhitespace(" "),
    )
    if not elements:
        return node.with_changes(elements=[new])
    last = elements[-1]
    separator: object = cst.SimpleWhitespace(" ")
    opening = node.lbrace.whitespace_after
    candidates = [e.comma.whitespace_after for e in elements[:-1] if isinstance(e.comma, cst.Comma)] + [opening]
    for ws in candidates:
        if isinstance(ws, cst.ParenthesizedWhitespace):
            separator = ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
            break
    closing = node.rbrace.whitespace_before
    rbrace = node.rbrace
    if isinstance(separator, cst.ParenthesizedWhitespace) and isinstance(closing, cst.ParenthesizedWhitespace):
        # One entry per line: the last entry's end-of-line comment stays on its line.
        own = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else cst.SimpleWhitespace("")
        first_line = closing.first_line
        if isinstance(own, cst.SimpleWhitespace) and own.value and not first_line.whitespace.value:
            first_line = first_line.with_changes(whitespace=own)
        elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=separator.with_changes(first_line=first_line)))
        if isinstance(last.comma, cst.Comma):
            new = new.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace("")))
        rbrace = rbrace.with_changes(whitespace_before=closing.with_changes(first_line=cst.TrailingWhitespace()))
    elif isinstance(last.comma, cst.Comma):
        elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=separator))  # type: ignore[arg-type]
        new = new.with_changes(comma=last.comma)
    else:
        elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=separator))  # type: ignore[arg-type]
    elements.append(new)
    return node.with_changes(elements=elements, rbrace=rbrace)


def assign_discarded(statement: cst.Expr, target: cst.BaseAssignTargetExpression) -> ModuleEdit:
    """`f(x)` as a statement -> `target = f(x)` (the semicolon, if any, is kept)."""
    new = cst.Assign(targets=[cst.AssignTarget(target=target)], value=statement.value, semicolon=statement.semicolon)
    return replace(statement, new)


def insert_positional(call: cst.Call, value: cst.BaseExpression) -> cst.Call:
    """Add `value` as the next positional argument (before any keyword argument),
    following the call's layout: `tx.update(g, s)` -> `tx.update(g, s, params)`."""
    args = list(call.args)
    index = 0
    while index < len(args) and args[index].keyword is None and not args[index].star:
        index += 1
    new = cst.Arg(value=value)
    if index == len(args):
        return call.with_changes(args=_appended(call, args, new))
    args.insert(index, new.with_changes(comma=cst.Comma(whitespace_after=_separator(call))))
    return call.with_changes(args=args)


def _blocks(parent: cst.CSTNode):
    """The indented blocks directly owned by a compound statement."""
    for name in ("body", "orelse", "finalbody"):
        part = getattr(parent, name, None)
        if isinstance(part, cst.IndentedBlock):
            yield part
        elif part is not None and isinstance(getattr(part, "body", None), cst.IndentedBlock):
            yield part.body  # Else / Finally
    for handler in getattr(parent, "handlers", ()) or ():
        if isinstance(handler.body, cst.IndentedBlock):
            yield handler.body
    for case in getattr(parent, "cases", ()) or ():
        if isinstance(case.body, cst.IndentedBlock):
            yield case.body


def insert_statement_after(parent: cst.CSTNode, statement: cst.BaseStatement, new: cst.BaseStatement, *, before: bool = False) -> ModuleEdit:
    """Insert `new` right after (or `before`) `statement`, in the block of `parent`
    (the walker's `parent_stmt` of the statement, or the Module) that holds it. The
    block's indentation applies; the anchor keeps its leading comments and blank lines
    (they move above the new statement when inserting before it)."""

    def apply(module: cst.Module) -> cst.Module:
        def inserted(body):
            out = []
            for item in body:
                if item is statement and before:
                    out.append(new.with_changes(leading_lines=item.leading_lines))
                    out.append(item.with_changes(leading_lines=()))
                    continue
                out.append(item)
                if item is statement:
                    out.append(new)
            if len(out) == len(body):
                raise ValueError("statement not found in its block")
            return out

        if isinstance(parent, cst.Module):
            if module is not parent and not any(s is statement for s in module.body):
                raise ValueError("statement not found at module level")
            return module.with_changes(body=inserted(module.body))
        for block in _blocks(parent):
            if any(s is statement for s in block.body):
                return module.deep_replace(block, block.with_changes(body=inserted(block.body)))
        raise ValueError("statement not found in its parent")

    return apply


_TIGHT = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.SimpleString)


def multiplied(expr: cst.BaseExpression, factor: str) -> cst.BinaryOperation:
    """`expr * factor`, parenthesising `expr` when it binds looser than `*`."""
    left = expr
    tight = isinstance(expr, _TIGHT) or (
        isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Divide, cst.FloorDivide))
    ) or bool(getattr(expr, "lpar", ()))
    if not tight:
        left = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.BinaryOperation(
        left=left,
        operator=cst.Multiply(whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")),
        right=cst.parse_expression(factor),
    )


def wrapped_in_call(expr: cst.BaseExpression, func: str) -> cst.Call:
    """`func(expr)`, the argument's own formatting kept."""
    return cst.Call(func=cst.parse_expression(func), args=[cst.Arg(value=expr)])


class _Rewriter(cst.CSTTransformer):
    def __init__(self, edits: dict) -> None:
        super().__init__()
        self.edits = edits

    def on_leave(self, original_node, updated_node):
        edit = self.edits.get(id(original_node))
        if edit is None:
            return updated_node
        return edit[1](updated_node)


def rewrite_nodes(edits: Sequence[tuple[cst.CSTNode, Callable]]) -> ModuleEdit:
    """Several edits applied in one pass (libcst's deep_replace rebuilds the whole tree,
    so a second deep_replace would no longer find its node). Each edit is a pair
    (original node, function of the updated node returning its replacement, which may
    be a FlattenSentinel for statements); nested edits compose."""
    table = {id(node): (node, edit) for node, edit in edits}

    def apply(module: cst.Module, memo: Optional[CodeMemo] = None) -> cst.Module:
        local = _in_statements(module, [node for node, _ in table.values()], lambda statement: statement.visit(_Rewriter(table)), memo)
        return local if local is not None else module.visit(_Rewriter(table))

    apply.shares_codegen = True  # type: ignore[attr-defined]
    return apply


def insert_arg_front(call: cst.Call, value: cst.BaseExpression) -> cst.Call:
    """Insert `value` as the first positional argument, following the call's layout
    (one argument per line stays one per line); comments stay where they were."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=[cst.Arg(value)])
    new = cst.Arg(value, comma=cst.Comma(whitespace_after=_separator(call)))
    return call.with_changes(args=[new, *args])


# Lines longer than this are split one argument per line, black's layout and width.
LINE_LIMIT = 88


def indent_unit(indent: str, default_indent: str = "") -> str:
    """One level of continuation indentation in the style of `indent`: a tab where the
    line is indented with tabs (or, at module level, where the file's blocks are:
    `default_indent` is libcst's `Module.default_indent`), else four spaces, which black
    and pyink both write inside brackets even in a file whose blocks are indented by two."""
    return "\t" if "\t" in indent or (not indent and default_indent == "\t") else "    "


def one_per_line(call: cst.Call, indent: str, default_indent: str = "") -> cst.Call:
    """`call` with one argument per line one level (`indent_unit`) deeper than `indent`
    and a trailing comma (black's layout for a call that does not fit), closing
    parenthesis back at `indent`."""
    if not call.args:
        return call
    inner = cst.ParenthesizedWhitespace(indent=False, last_line=cst.SimpleWhitespace(indent + indent_unit(indent, default_indent)))
    close = cst.ParenthesizedWhitespace(indent=False, last_line=cst.SimpleWhitespace(indent))
    args = [a.with_changes(comma=cst.Comma(whitespace_after=inner)) for a in call.args[:-1]]
    args.append(call.args[-1].with_changes(comma=cst.Comma(whitespace_after=close)))
    return call.with_changes(args=args, whitespace_before_args=inner)


def is_multi_line(call: cst.Call) -> bool:
    return "\n" in node_code(call.with_changes(func=cst.Name("f")))


def fit_call(call: cst.Call, indent: str, used: int, limit: int = LINE_LIMIT, default_indent: str = "") -> cst.Call:
    """`call` as is when `used` columns plus its one-line text fit in `limit`, else one
    argument per line. `used` counts what precedes the call on its line and follows it."""
    if used + len(node_code(call)) <= limit:
        return call
    return one_per_line(call, indent, default_indent)


def line_indent(text: str, line: int) -> str:
    lines = text.splitlines()
    current = lines[line - 1] if 0 < line <= len(lines) else ""
    return current[: len(current) - len(current.lstrip())]


def _code_length(line: str) -> int:
    """A line's length without its trailing comment (what a formatter's limit counts)."""
    return len(line.split("  #", 1)[0].rstrip())


class _SplitCalls(cst.CSTTransformer):
    def __init__(self, targets: dict[int, str], default_indent: str) -> None:
        super().__init__()
        self.targets = targets  # id(call) -> indent of its line
        self.default_indent = default_indent  # the module's block indentation

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        indent = self.targets.get(id(original_node))
        return one_per_line(updated_node, indent, self.default_indent) if indent is not None else updated_node


def reflowed(edit: ModuleEdit, limit: int = LINE_LIMIT) -> ModuleEdit:
    """`edit`, then black's layout for the lines it made too long: a line the edit wrote
    (not in the file before) whose code is wider than the file's own lines (at least
    `limit`, at most 118) has its outermost one-line call split one argument per line.
    Lines the user wrote are never reformatted."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    def apply(module: cst.Module, memo: Optional[CodeMemo] = None) -> cst.Module:
        memo = memo if memo is not None else CodeMemo()
        new = edit(module, memo) if getattr(edit, "shares_codegen", False) else edit(module)
        old_lines = memo.code(module).splitlines()
        old_set = set(old_lines)
        # The file's own width, between black's 88 and 119: a file written to 100 columns
        # may get 100-column lines, never a 119-column one.
        width = max(limit, min(max((_code_length(line) for line in old_lines), default=0), 118))
        for _ in range(3):  # a split call's arguments may themselves be too long
            new_lines = memo.code(new).splitlines()
            long = {n for n, line in enumerate(new_lines, start=1) if line not in old_set and _code_length(line) > width}
            if not long:
                break
            positions = MetadataWrapper(new, unsafe_skip_copy=True).resolve(PositionProvider)
            outermost: dict[int, tuple[tuple[int, int], cst.Call]] = {}
            for node, rng in positions.items():
                if isinstance(node, cst.Call) and node.args and rng.start.line in long and rng.start.line == rng.end.line:
                    key = (rng.start.column, -rng.end.column)  # `f(a)(b)`: the outer call spans further
                    if rng.start.line not in outermost or key < outermost[rng.start.line][0]:
                        outermost[rng.start.line] = (key, node)
            if not outermost:
                break
            targets = {}
            for line, (_, call) in outermost.items():
                text = new_lines[line - 1]
                targets[id(call)] = text[: len(text) - len(text.lstrip())]
            new = new.visit(_SplitCalls(targets, module.default_indent))
        return new

    apply.shares_codegen = True  # type: ignore[attr-defined]  # takes the fix round's CodeMemo
    return apply


def _import_key(statement: cst.CSTNode) -> Optional[tuple[bool, str, str]]:
    """(is a from-import, module, first name) of a one-import line; None for the rest."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    node = statement.body[0]
    if isinstance(node, cst.Import):
        return False, cst.Module([]).code_for_node(node.names[0].name).lower(), ""
    if isinstance(node, cst.ImportFrom) and node.module is not None and not node.relative:
        first = node.names[0].name if isinstance(node.names, Sequence) and node.names else None
        name = cst.Module([]).code_for_node(first).lower() if first is not None else ""
        return True, cst.Module([]).code_for_node(node.module).lower(), name
    return None


def _sorted_under(keys: list, order: Callable) -> bool:
    return all(order(a) <= order(b) for a, b in zip(keys, keys[1:]))


def insert_import(body: list, new: cst.SimpleStatementLine) -> list:
    """`body` (a module's statements) with the import line `new` placed among the file's
    top-level imports, in their order: in the blank-line-separated group that imports
    the same top-level package (else the last group of the block), at its sorted place
    when the group is sorted, isort-style (`import x` lines, then `from x import y`) or
    Google-style (both forms sorted together by module); else after the group's last
    import."""
    new_key = _import_key(new)
    block: list[int] = []
    for i, statement in enumerate(body):
        if _import_key(statement) is not None:
            block.append(i)
        elif block or not (isinstance(statement, cst.SimpleStatementLine) and all(isinstance(s, cst.Expr) for s in statement.body)):
            break  # imports end at the first other statement (a docstring may come first)
    block = [i for i in block if _import_key(body[i])[1] != "__future__"]
    if new_key is None or not block:
        return body
    groups: list[list[int]] = [[block[0]]]
    for i in block[1:]:
        gap = i != groups[-1][-1] + 1 or any(line.comment is None for line in body[i].leading_lines)
        if gap:
            groups.append([i])
        else:
            groups[-1].append(i)
    top = new_key[1].split(".")[0]
    group = next((g for g in groups if any(_import_key(body[i])[1].split(".")[0] == top for i in g)), groups[-1])
    keys = [_import_key(body[i]) for i in group]
    at = group[-1] + 1
    for order in ((lambda k: (k[0], k[1], k[2])), (lambda k: (k[1], k[0], k[2]))):
        if _sorted_under(keys, order):
            at = next((i for i, k in zip(group, keys) if order(new_key) < order(k)), group[-1] + 1)
            break
    out = list(body)
    if at == group[0]:  # it leads the group: it takes over the group's leading lines
        out[at] = body[at].with_changes(leading_lines=[])
        new = new.with_changes(leading_lines=body[at].leading_lines)
    else:
        new = new.with_changes(leading_lines=[])
    out.insert(at, new)
    return out
