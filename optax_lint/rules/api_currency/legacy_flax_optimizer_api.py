"""OPX703 legacy-flax-optimizer-api: The flax optimizer API that current flax rejects:
`flax.optim`, `nnx.Optimizer(model, tx)` without `wrt=`, `optimizer.update(grads)`."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.api_currency import (
    model_name_at,
    nnx_constructions,
    nnx_rebound,
    optimizer_origin,
    table_for,
)
from optax_lint.facts.file_role import belongs_to
from optax_lint.rules.api_currency.references import gated, older_target, report_references
from optax_lint.rules.api_currency.rewrites import as_keyword, spell
from optax_lint.rules.api_currency.wording import code_text, severity, upgrade_advice
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.nodes import node_code


class LegacyFlaxOptimizerApi(Rule):
    code = "OPX703"

    def check(self, ctx: Context) -> None:
        report_references(ctx, self.code)
        facts = ctx.facts
        table = table_for(facts)
        nnx = table.nnx
        if not nnx or belongs_to(facts.path, "flax") or nnx_rebound(facts):
            return
        version = table.version_of("flax")
        since = nnx.get("since", "")
        for record in nnx_constructions(facts):
            self._construction(ctx, record, version, since)
        seen: set[int] = set()
        for record in facts.raw.calls:
            call = record.node
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value != "update":
                continue
            positional = [a for a in call.args if a.keyword is None]
            if len(positional) != 1 or any(a.star for a in call.args):
                continue
            if optimizer_origin(facts, func.value, record.scope) is None:
                continue
            seen.add(id(call))
            model = model_name_at(facts, func.value, record.scope)
            fix = None
            if model is not None:
                new_first = cst.Arg(value=cst.Name(model), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                fix = fixes.replace(call, call.with_changes(args=[new_first, *call.args]))
            fix, title, help_text = gated(ctx, fix, "flax.nnx.Optimizer.update(model, grads)", f"Pass {model} as the first argument")
            older = older_target(ctx, "flax", since)
            finding = ctx.report(
                call,
                subject=code_text(call),
                state=_state(f"passes only the gradients (TypeError in {version}: nnx.Optimizer.update "
                             f"takes (model, grads) since flax {since})",
                             f"passes only the gradients (a TypeError from flax {since}, where nnx.Optimizer.update "
                             f"takes (model, grads))", older),
                advice=upgrade_advice(f"pass the model first: {code_text(func.value)}.update({model or 'model'}, grads)", older),
                fix=fix,
                fix_title=title,
                help=help_text,
            )
            finding.severity = severity(True, older)
        for read in facts_model_reads(facts):
            if optimizer_origin(facts, read.node.value, read.scope) is None:
                continue
            older = older_target(ctx, "flax", since)
            finding = ctx.report(
                read.node,
                subject=code_text(read.node),
                state=_state(f"does not exist (AttributeError in {version}: nnx.Optimizer keeps no model "
                             f"since flax {since})",
                             f"is gone from flax {since} (an AttributeError there: nnx.Optimizer keeps no model)", older),
                advice=upgrade_advice("keep your own reference to the model, or build nnx.ModelAndOptimizer, "
                                      "which still has .model", older),
            )
            finding.severity = severity(True, older)

    def _construction(self, ctx: Context, record, version: str, since: str) -> None:
        call = record.node
        if any(a.star for a in call.args):
            return
        if any(a.keyword is not None and a.keyword.value == "wrt" for a in call.args):
            return
        positional = [a for a in call.args if a.keyword is None]
        fix = None
        advice = "pass wrt=nnx.Param, the default before flax 0.11, and update(model, grads)"
        if len(positional) == 3:
            fix = fixes.replace(positional[2], as_keyword(positional[2], "wrt"))
            title = f"Pass {describe(positional[2].value)} as wrt="
            advice = f"pass the filter by keyword, wrt={describe(positional[2].value)}, and update(model, grads)"
        elif len(positional) <= 2:
            param = spell(table_for(ctx.facts).nnx.get("legacy_wrt_default", "flax.nnx.Param"), record.scope)
            if param is not None:
                fix = fixes.replace(call, fixes.add_keyword(call, "wrt", param))
                title = f"Add wrt={node_code(param)} (the pre-0.11 default)"
        else:
            return
        fix, title, help_text = gated(ctx, fix, "flax.nnx.Optimizer(wrt=)", title if fix is not None else "")
        older = older_target(ctx, "flax", since)
        finding = ctx.report(
            call,
            subject=code_text(call),
            state=_state(f"has no wrt= keyword (TypeError in {version}: wrt is required since flax {since})",
                         f"has no wrt= keyword (a TypeError from flax {since}, where wrt became required)", older),
            advice=upgrade_advice(advice, older),
            fix=fix,
            fix_title=title,
            help=help_text,
        )
        finding.severity = severity(True, older)


def _state(now: str, later: str, older) -> str:
    """The state on the tabled flax, or, when the code targets an older flax (`older`
    names it), the break it meets on upgrading."""
    return now if older is None else f"{later}; {older}, which still accepts it"


def facts_model_reads(facts):
    return facts.currency.model_reads
