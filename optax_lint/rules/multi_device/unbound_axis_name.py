"""OPX402 unbound-axis-name: A collective names an axis that no enclosing
pmap/shard_map/vmap binds (including a pmap with no axis_name)."""

from __future__ import annotations

import libcst as cst

from optax_lint.facts.parallel.names import fmt_axes
from optax_lint.facts.parallel.sites import MappedStep
from optax_lint.rules.base import Context, Rule, describe
from optax_lint.syntax import edits as fixes
from optax_lint.syntax.arguments import call_arg_expr


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
            fix = fix_title = None
            if _binds_one(root) and not use.path:
                fix, fix_title = _rename_axis(collective, root)
            elif root.axis_names is None and root.kind == "pmap":
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
                fix_title=fix_title,
                related=[(root.site, "mapped here")],
            )


def _binds_one(root: MappedStep) -> bool:
    return root.kind == "pmap" and isinstance(root.axis_names, frozenset) and len(root.axis_names) == 1


def _rename_axis(collective, root: MappedStep):
    """A collective written in the mapped function itself over a name its pmap does not
    bind is a misnamed collective: rename its literal axis to the one the pmap binds
    (a helper reached from elsewhere may serve another pmap, so it is never renamed)."""
    literal = call_arg_expr(collective.call, 1, "axis_name")
    if not isinstance(literal, cst.SimpleString) or not isinstance(collective.axes, frozenset) or len(collective.axes) != 1:
        return None, None
    (axis,) = root.axis_names
    title = f"Rename the axis to {axis!r}, the one {root.describe()} binds"
    return fixes.replace(literal, cst.SimpleString(_quote(axis))), title


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
