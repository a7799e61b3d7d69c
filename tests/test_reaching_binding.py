"""RawFacts.reaching_binding: the binding that certainly holds where a name is read
(checkpoint flows use it to stop following a name once it is rebound)."""

from __future__ import annotations

import textwrap

import libcst as cst

from optax_lint.syntax.walker import collect


def _reaching(source: str, name: str, marker: str):
    """The line of the binding of `name` that reaches the statement ending in `# <marker>`."""
    text = textwrap.dedent(source)
    module = cst.parse_module(text)
    raw = collect(module)
    lines = text.splitlines()
    statements = [node for node in raw.parent_stmt if isinstance(node, cst.SimpleStatementLine)]
    read = next(s for s in statements if module.code_for_node(s).rstrip().endswith(f"# {marker}"))
    scope = next(s for s in raw.scopes if name in s.bindings)
    binding = raw.reaching_binding(scope.bindings[name], read)
    if binding is None:
        return None
    code = module.code_for_node(binding.node).strip().splitlines()[0]
    return next(i for i, line in enumerate(lines, 1) if line.strip() == code)


SOURCE = """
def launch(config):
    if config.resume:
        ckpt = restore(config.dir)
        use(ckpt)  # first
    state = make()
    if config.resume:
        ckpt = dict(model=state)
        for step in range(3):
            use(ckpt)  # nested
        state = ckpt["model"]  # same-block
    use(ckpt)  # after-branch
    if config.other:
        ckpt = 1
    else:
        ckpt = 2
    use(ckpt)  # after-if-else
    if config.x: ckpt = 3
    use(ckpt)  # one-line-if
"""


def test_same_block_binding_reaches_the_read():
    assert _reaching(SOURCE, "ckpt", "first") == 4
    assert _reaching(SOURCE, "ckpt", "same-block") == 8


def test_binding_before_an_enclosing_statement_reaches_a_nested_read():
    assert _reaching(SOURCE, "ckpt", "nested") == 8


def test_bindings_inside_branches_reach_no_later_read():
    assert _reaching(SOURCE, "ckpt", "after-branch") is None
    assert _reaching(SOURCE, "ckpt", "after-if-else") is None
    assert _reaching(SOURCE, "ckpt", "one-line-if") is None


LOOP = """
def fit(batches):
    ckpt = restore()
    for batch in batches:
        use(ckpt)  # in-loop
        ckpt = None
    use(ckpt)  # after-loop
"""


def test_a_binding_later_in_a_loop_may_reach_a_read_earlier_in_it():
    assert _reaching(LOOP, "ckpt", "in-loop") is None
    assert _reaching(LOOP, "ckpt", "after-loop") is None


BRANCH = """
def resume(config):
    ckpt = restore()
    if config.fresh:
        ckpt = None
    use(ckpt)  # after-maybe
"""


def test_a_branch_between_may_have_rebound_the_name():
    assert _reaching(BRANCH, "ckpt", "after-maybe") is None
