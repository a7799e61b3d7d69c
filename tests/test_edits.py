"""Edits rebuild only the top-level statements that hold their targets: the result must
be what libcst's whole-module transform gives, and the other statements untouched."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from optax_lint.syntax import edits

TEXT = "import optax\n\n\ndef f():\n    return optax.adam(1e-3)  # keep\n\n\nx = optax.sgd(0.1)\ny = 2\n"


def _call(module: cst.Module, name: str) -> cst.Call:
    return next(n for n in m.findall(module, m.Call(func=m.Attribute(attr=m.Name(name)))))


def test_replace_rebuilds_only_the_statement_that_holds_the_target() -> None:
    module = cst.parse_module(TEXT)
    old = _call(module, "adam")
    new = old.with_changes(func=old.func.with_changes(attr=cst.Name("adamw")))
    result = edits.replace(old, new)(module)
    assert result.code == module.deep_replace(old, new).code == TEXT.replace("adam(", "adamw(")
    assert [a is b for a, b in zip(result.body, module.body)] == [True, False, True, True]


def test_a_statement_replaced_by_several_is_spliced() -> None:
    module = cst.parse_module(TEXT)
    line = module.body[2]
    extra = cst.parse_statement("lr = 0.1\n")
    result = edits.replace(line, cst.FlattenSentinel([extra, line]))(module)
    assert result.code == module.deep_replace(line, cst.FlattenSentinel([extra, line])).code
    assert result.code == TEXT.replace("\n\n\nx = optax.sgd", "\nlr = 0.1\n\n\nx = optax.sgd")


def test_rewrite_nodes_in_two_statements_compose() -> None:
    module = cst.parse_module(TEXT)
    adam, sgd = _call(module, "adam"), _call(module, "sgd")
    result = edits.rewrite_nodes([
        (adam.args[0].value, lambda _: cst.Float("3e-4")),
        (sgd, lambda node: node.with_changes(args=[cst.Arg(cst.Float("0.2"))])),
    ])(module)
    assert result.code == TEXT.replace("1e-3", "3e-4").replace("sgd(0.1)", "sgd(0.2)")
    assert result.body[0] is module.body[0] and result.body[3] is module.body[3]


def test_a_target_outside_every_statement_falls_back_to_the_whole_module() -> None:
    module = cst.parse_module(TEXT)
    replaced = module.with_changes(footer=[cst.EmptyLine(comment=cst.Comment("# end"))])
    assert edits.rewrite_nodes([(module, lambda _: replaced)])(module).code == TEXT + "# end\n"


def test_the_round_memo_puts_code_together_from_statements_generated_once() -> None:
    """A candidate fix changes one statement: the memo generates that statement's code
    and reuses the others', and the text is the module's own codegen, byte for byte
    (CRLF, tabs, comments in the header and footer, no trailing newline)."""
    for text in (TEXT, "# head\n\nx = 1\r\ny = 2\r\n# tail\r\n", "def f():\n\tpass\n", "x = 1", ""):
        module = cst.parse_module(text)
        assert edits.CodeMemo().code(module) == module.code == text
    module = cst.parse_module(TEXT)
    memo = edits.CodeMemo()
    memo.code(module)
    old = _call(module, "sgd")
    new_module = edits.replace(old, old.with_changes(func=old.func.with_changes(attr=cst.Name("adam"))))(module, memo)
    generated = []
    original = cst.Module.code_for_node
    cst.Module.code_for_node = lambda self, node: generated.append(node) or original(self, node)  # type: ignore[method-assign]
    try:
        code = memo.code(new_module)
    finally:
        cst.Module.code_for_node = original  # type: ignore[method-assign]
    assert code == TEXT.replace("sgd(", "adam(")
    assert generated == [new_module.body[2]]  # only the changed statement
    # Every candidate of the round asks which statement holds its node: one walk.
    owners = memo.owners(module)
    assert owners is memo.owners(module) and owners.of(old) == 2 and owners.mapped == 3
