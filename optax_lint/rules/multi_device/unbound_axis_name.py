"""OPX402 unbound-axis-name: A collective names an axis that no enclosing
pmap/shard_map/vmap binds (including a pmap with no axis_name)."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.parallel.names import fmt_axes
from optax_lint.facts.parallel.sites import MappedStep
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.syntax import edits as fixes


class UnboundAxisName(Rule):
    code = "OPX402"

    def check(self, ctx: Context) -> None:
        pf = ctx.facts.parallel
        for use in pf.unbound_axis_uses():
            root = use.root
            collective = use.collective
            if root.axis_names is None:
                binding = f"{root.describe()} has no axis_name"
            else:
                verb = "is" if len(use.bound) == 1 else "are"
                binding = f"only {fmt_axes(use.bound)} {verb} bound there ({root.describe()} binds {fmt_axes(root.axis_names)})"
            if use.path:
                binding += ", reached through " + " -> ".join(n.value for n in use.path)
            fix = None
            if root.axis_names is None and root.kind == "pmap":
                wanted = _named_axes(pf, root)
                if wanted is not None and len(wanted) == 1 and root.arg_call is not None and not root.has_star:
                    axis = next(iter(wanted))
                    fix = fixes.replace(root.arg_call, fixes.add_keyword(root.arg_call, "axis_name", cst.SimpleString(_quote(axis))))
            ctx.report(
                collective.call,
                collective=describe(collective.call),
                axis=fmt_axes(use.missing),
                binding=binding,
                step=root.describe(),
                fix=fix,
                related=[(root.site, "mapped here")],
            )


def _named_axes(pf, root: MappedStep):
    """Every axis name the collectives reachable from a mapped function use, or None
    when one of them is not a literal."""
    names: set = set()
    for collective in pf.collectives_in(root.function, transitive=True):
        if not isinstance(collective.axes, frozenset):
            return None
        names |= collective.axes
    return names


def _quote(axis: str) -> str:
    return '"' + axis + '"' if '"' not in axis and "\\" not in axis else repr(axis)
