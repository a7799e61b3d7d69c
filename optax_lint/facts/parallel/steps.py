"""Multi-device facts of a module (docs/protocol.md#multi-device-training), gathered
behind `ModuleFacts.parallel`; each job lives in its own module of this package:

- **Mapped steps** (sites.py, mesh.py). Every `jax.pmap` (decorator, call,
  `functools.partial(jax.pmap, axis_name=...)`), `jax.shard_map` / `jax.smap`, `jax.vmap`
  and `jax.jit` site, with the function it maps, its axis name(s), `in_axes` and
  `static_broadcasted_argnums`. shard_map and jit steps are recorded so that pmap rules
  can tell them apart: SPMD `jit` needs no `pmean`.
- **Collectives** (collectives.py). `lax.pmean` / `psum` / `pmax` / `all_gather` / ...
  with the axis names they name, and what they reduce (grads, loss, metrics); tracing.py
  finds those naming an axis their mapped step does not bind.
- **Gradient data-flow** (grads.py, on the interpreter of interpreter.py). The output of
  `jax.grad` / `value_and_grad` followed to `tx.update` / `apply_gradients` /
  `optax.apply_updates`, recording over which axes the gradients were reduced.
- **Replication** (host.py). Host-side values followed through the module: which cross
  into a pmapped call (`crossings`) and which saves write a replicated tree.
- **Devices and batches** (devices.py), for the linear scaling rule.

Whatever cannot be followed is Unknown, and rules stay silent on Unknown.

For other families: `facts.parallel.crossings` lists the values passed to
pmapped callables (`Crossing.value` is `AFresh` for host-side state from
create/init/restore, `ARepl` for replicated or pmap-output trees, `ASingle` for
unreplicated copies), and `facts.parallel.replicated_saves` the saves that write
a replicated tree.
"""

from __future__ import annotations

import functools
import re
from typing import Optional

import libcst as cst

from optax_lint.facts.parallel.collectives import (
    Collective,
    classify_operand,
    find_collectives,
)
from optax_lint.facts.parallel.grads import GradFlow, trace_grads
from optax_lint.facts.parallel.host import (
    AFresh,
    ARepl,
    Crossing,
    HostInterpreter,
    ReplicatedSave,
    walk_host,
)
from optax_lint.facts.parallel.names import DATA_PARALLEL_AXES
from optax_lint.facts.parallel.sites import MappedStep, SiteFinder
from optax_lint.facts.parallel.tracing import Tracing, UnboundUse
from optax_lint.facts.context.region import calls_of_local_functions
from optax_lint.syntax.nodes import last_name
from optax_lint.syntax.walker import Scope, enclosing_function, walk

_REPLICATE_CALLS = frozenset({"replicate", "device_put_replicated", "replicate_in_all_devices", "device_put_sharded"})
_OPTIMIZER_NAME = re.compile(r"^(tx|opt|optim|optimi[sz]er|.*_optimi[sz]er|.*_tx)$")
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def _repeated(record) -> bool:
    """The call runs once per pass of a loop or comprehension of its function."""
    if record.loop_depth > 0:
        return True
    return any(isinstance(node, _COMPREHENSIONS) and any(inner is record.node for inner in walk(node))
               for node in walk(record.statement))


class ParallelFacts:
    """The multi-device facts of one module (`ModuleFacts.parallel`); the costly parts
    (collectives, gradient flows, the host walk, tracing) are computed on demand."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self.raw = facts.raw
        self.sites = SiteFinder(facts)
        self.steps: list[MappedStep] = self.sites.find()
        self.step_by_site: dict[cst.CSTNode, MappedStep] = {s.site: s for s in self.steps if s.decorated is None}
        self._decorated: dict[Scope, MappedStep] = {}
        for s in self.steps:
            if s.decorated is not None and s.function is not None and s.kind in ("pmap", "shard_map"):
                self._decorated.setdefault(s.function, s)
        self.tracing = Tracing(self)
        self._flows: dict[Scope, GradFlow] = {}
        self._collectives: Optional[list[Collective]] = None
        self._host: Optional[HostInterpreter] = None
        self._classified = False

    # -- steps --------------------------------------------------------------
    @property
    def pmap_steps(self) -> list[MappedStep]:
        return [s for s in self.steps if s.kind == "pmap"]

    def decorated_step(self, function: Scope) -> Optional[MappedStep]:
        return self._decorated.get(function)

    def is_nested_site(self, step: MappedStep) -> bool:
        """Whether the site is written inside a function that some mapped step traces."""
        return self.tracing.is_nested_site(step)

    # -- collectives --------------------------------------------------------
    @property
    def collectives(self) -> list[Collective]:
        if self._collectives is None:
            self._collectives = find_collectives(self.facts)
        return self._collectives

    @property
    def classified_collectives(self) -> list[Collective]:
        """The collectives, each with what it reduces: `grads` when the gradient
        data-flow of a mapped step reaches its operand, else judged by the operand's
        name (`loss`, `metrics`, `grads`) or `other`."""
        collectives = self.collectives
        if not self._classified:
            reduced = set()
            for step in self.steps:
                if step.function is not None:
                    reduced.update(r.collective for r in self.grad_flow(step.function).reductions)
            for collective in collectives:
                collective.reduces = "grads" if collective.call in reduced else classify_operand(collective.operand)
            self._classified = True
        return collectives

    @staticmethod
    def belongs(scope: Scope, function: Scope) -> bool:
        """Whether code in `scope` runs as part of `function`: the function itself or a
        lambda/comprehension inside it (nested defs are separate functions)."""
        while True:
            if scope is function:
                return True
            if scope.kind in ("lambda", "comprehension") and scope.parent is not None:
                scope = scope.parent
                continue
            return False

    def collectives_in(self, function: Scope, transitive: bool = False) -> list[Collective]:
        functions = self.tracing.reachable(function) if transitive else [function]
        return [c for c in self.collectives if any(self.belongs(c.record.scope, f) for f in functions)]

    def unbound_axis_uses(self) -> list[UnboundUse]:
        """Collectives naming an axis that the pmap/shard_map site tracing them does not
        bind (nor any vmap/pmap/shard_map between the site and the collective)."""
        return self.tracing.unbound_axis_uses()

    # -- gradient flow ------------------------------------------------------
    def grad_flow(self, function: Scope) -> GradFlow:
        flow = self._flows.get(function)
        if flow is None:
            flow = self._flows[function] = GradFlow(function)
            trace_grads(self, flow)
        return flow

    # -- host-side replication ----------------------------------------------
    @property
    def host(self) -> HostInterpreter:
        if self._host is None:
            self._host = walk_host(self)
        return self._host

    @property
    def crossings(self) -> list[Crossing]:
        """Values passed to pmapped callables (which state crosses into a pmapped call)."""
        return self.host.crossings

    @property
    def replicated_saves(self) -> list[ReplicatedSave]:
        return self.host.saves

    # -- data parallelism ---------------------------------------------------
    def is_data_parallel(self, step: MappedStep) -> bool:
        """A pmap whose devices hold copies of one model: a replicated argument, host
        state broadcast with in_axes=None, a collective over its axis, or an axis
        named like a data axis. (A pmap over independent models, an ensemble, has
        none of these; nor does one over a population, whatever its axis is called.)"""
        if step.kind != "pmap":
            return False
        axes = step.axis_names
        if isinstance(axes, frozenset) and axes & DATA_PARALLEL_AXES and not self.builds_population:
            return True
        for crossing in self.crossings:
            if crossing.step is not step:
                continue
            if isinstance(crossing.value, ARepl) and crossing.value.how == "replicate":
                return True  # one model copied to every device
            if crossing.axis is None and isinstance(crossing.value, AFresh):
                return True  # one host-side state broadcast with in_axes=None
        if step.function is not None and isinstance(axes, frozenset):
            for collective in self.collectives_in(step.function, transitive=True):
                if isinstance(collective.axes, frozenset) and collective.axes & axes:
                    return True
        return False

    @functools.cached_property
    def builds_population(self) -> bool:
        """The file builds one optimizer state per member of a population and copies
        nothing to every device: an optimizer's `init` runs in a loop or comprehension
        (directly, or in a local function called from one), and no replicate call is
        made. A pmap over such states gives each device its own member (one agent per
        device), so an axis named `data` says nothing about data parallelism."""
        facts = self.facts
        if any(last_name(r.node.func) in _REPLICATE_CALLS for r in self.raw.calls):
            return False
        repeated = {id(target) for record, target in calls_of_local_functions(facts) if _repeated(record)}
        for record in self.raw.calls:
            func = record.node.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "init" and record.node.args):
                continue
            if facts.pipeline_for(func.value, record.scope) is None and not _OPTIMIZER_NAME.search(last_name(func.value) or ""):
                continue
            if _repeated(record) or id(enclosing_function(record.scope)) in repeated:
                return True
        return False

    def train_steps(self) -> list[MappedStep]:
        """pmapped data-parallel steps that update parameters."""
        out = []
        for step in self.pmap_steps:
            if step.function is None or not self.is_data_parallel(step):
                continue
            if self.grad_flow(step.function).sinks:
                out.append(step)
        return out

