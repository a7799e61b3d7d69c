"""OPX701 deprecated-optax-api: An optax name that the installed optax has removed
(AttributeError) or deprecated."""

from __future__ import annotations

import libcst as cst

from optax_lint.core.diagnostics import Severity
from optax_lint.facts.api_currency import table_for
from optax_lint.facts.file_role import belongs_to
from optax_lint.rules.api_currency.references import gated, report_references
from optax_lint.rules.api_currency.wording import code_text
from optax_lint.rules.base import Context, Rule
from optax_lint.syntax import edits as fixes


class DeprecatedOptaxApi(Rule):
    code = "OPX701"

    def check(self, ctx: Context) -> None:
        report_references(ctx, self.code)
        self._arguments(ctx)

    def _arguments(self, ctx: Context) -> None:
        facts = ctx.facts
        if belongs_to(facts.path, "optax"):
            return  # optax's own modules keep the old keywords working on purpose
        table = table_for(facts)
        for path, argument in sorted(table.arguments.items()):
            entry = facts.api.entry(path)
            for record in facts.calls_by_name.get(path, ()):
                call = record.node
                keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
                for old, new in argument.rename.items():
                    arg = keywords.get(old)
                    if arg is None:
                        continue
                    fix = None
                    positional = [a for a in call.args if a.keyword is None]
                    index = entry.params.index(new) if entry is not None and new in entry.params else None
                    if new not in keywords and not any(a.star for a in call.args) and index is not None and len(positional) <= index:
                        fix = fixes.replace(arg, arg.with_changes(keyword=cst.Name(new)))
                    fix, title, help_text = gated(ctx, fix, f"{path}({new}=)", f"Rename {old}= to {new}=")
                    finding = ctx.report(
                        arg,
                        subject=f"{old}= in {code_text(call)}",
                        state=f"is deprecated (DeprecationWarning when called, {table.version_of(path)})",
                        advice=f"pass {new}= instead (the same value gives the same key)",
                        fix=fix,
                        fix_title=title,
                        help=help_text,
                    )
                    finding.severity = Severity.WARNING
