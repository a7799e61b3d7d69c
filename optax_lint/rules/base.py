"""What a rule is: a small class with a code and a `check` over `ModuleFacts`, in a
module of its own that `registry.py` finds from the catalogue.

Rules never walk syntax themselves; they read facts (pipelines, steps, update sites)
and report through `Context`, which fills in the catalogue's name, severity and
message template, so wording lives in `rules/*.toml`, not in code.
"""

from __future__ import annotations

from typing import Callable, ClassVar, Iterable, Iterator, Optional

import libcst as cst

from optax_lint.core.catalogue import RuleSpec
from optax_lint.core.diagnostics import Applicability, Finding, Fix, Related
from optax_lint.facts.file_role import in_test_function, is_test_file
from optax_lint.facts.module import ModuleFacts
from optax_lint.syntax.edits import reflowed
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.positions import Positions


def describe(node: cst.CSTNode, limit: int = 48) -> str:
    """Short source text of a node for messages: `clip_by_global_norm(1.0)`, `adamw(...)`."""
    if isinstance(node, cst.Call):
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else node_text(func)
        if isinstance(func, cst.Call):  # inject_hyperparams(optax.adamw)(...)
            inner = func.args[0].value if func.args else None
            inner_name = inner.attr.value if isinstance(inner, cst.Attribute) else (node_text(inner) if inner is not None else "?")
            name = f"inject_hyperparams({inner_name})"
        args = ", ".join(node_text(a).rstrip(", ") for a in node.args)
        text = f"{name}({args})"
        return text if len(text) <= limit and "\n" not in text else f"{name}(...)"
    text = node_text(node)
    return text if len(text) <= limit and "\n" not in text else text.split("\n")[0][:limit] + "..."



# Said in the title of every fix that changes the optimizer state's structure (a transform
# added, removed or moved in a chain, a mask added, a constant LR turned into a schedule).
STATE_LAYOUT_NOTE = " (the optimizer state changes structure: a checkpoint of the old opt_state will not restore into it)"


class Context:
    """Per-file, per-rule reporting helper."""

    def __init__(self, facts: ModuleFacts, spec: RuleSpec, options: dict, positions: Positions) -> None:
        self.facts = facts
        self.spec = spec
        self.options = options
        self.positions = positions
        self.findings: list[Finding] = []

    def option(self, name: str):
        if name in self.options:
            return self.options[name]
        return self.spec.options[name].default

    def report(
        self,
        node: cst.CSTNode,
        *,
        fix: Optional[Callable[[cst.Module], cst.Module]] = None,
        fix_title: Optional[str] = None,
        applicability: Optional[Applicability] = None,
        help: Optional[str] = None,
        related: Iterable[tuple[cst.CSTNode, str]] = (),
        changes_state: bool = False,
        **message_args: object,
    ) -> Finding:
        """`changes_state`: the fix changes the optimizer state's structure. Its title then
        says so, and no such fix is offered in a test file or test function, where state
        layouts are asserted and checkpoints are fixtures."""
        spec = self.spec
        message = spec.message.format(**message_args)
        fix_obj = None
        title = (fix_title or spec.fix_title).format(**message_args) if (fix_title or spec.fix_title) else ""
        if changes_state and fix is not None:
            record = self.facts.record_of.get(node) if isinstance(node, cst.Call) else None
            if is_test_file(self.facts.path) or (record is not None and in_test_function(record.scope)):
                fix, title = None, ""
            else:
                title += STATE_LAYOUT_NOTE
        if fix is not None or (spec.fix is Applicability.DISPLAY_ONLY and title):
            fix_obj = Fix(title=title, applicability=applicability or spec.fix or Applicability.DISPLAY_ONLY, apply=reflowed(fix) if fix else None)
        finding = Finding(
            code=spec.code,
            name=spec.name,
            severity=spec.severity,
            message=message,
            path=self.facts.path,
            span=self.positions.span(node),
            fix=fix_obj,
            related=[Related(msg, self.positions.span(rel)) for rel, msg in related if rel is not None],
            node=node,
            help=help or _help(spec.help, message_args),
        )
        self.findings.append(finding)
        return finding


def _help(template: str, args: dict) -> str:
    try:
        return template.format(**args)
    except (KeyError, IndexError):  # a field this finding has no value for
        return template


class Rule:
    code: ClassVar[str]

    def check(self, ctx: Context) -> Iterator[None] | None:  # pragma: no cover - interface
        raise NotImplementedError
