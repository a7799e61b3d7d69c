"""What the collection finds: orbax checkpointers and managers, save and restore sites,
and checkpoint calls in a legacy form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from optax_lint.facts.checkpoints.payload import Payload
from optax_lint.syntax.walker import CallRecord


@dataclass(eq=False)
class CheckpointObject:
    """An orbax checkpointer or manager, as constructed."""

    kind: str  # manager | checkpointer | pytree_checkpointer | standard_checkpointer | async_checkpointer
    call: Optional[cst.Call]  # None when known only from a type annotation
    record: Optional[CallRecord]
    legacy_checkpointers: Optional[cst.Arg] = None  # CheckpointManager(dir, PyTreeCheckpointer())
    module_prefix: Optional[str] = None  # how the orbax module is spelled ('ocp'), for fixes


@dataclass(eq=False)
class SaveSite:
    api: str  # orbax | flax_checkpoints | flax_serialization | pickle | numpy
    method: str  # human-readable callee: "CheckpointManager.save", "pickle.dump", ...
    record: CallRecord
    payload_expr: Optional[cst.BaseExpression]
    payload: Payload
    receiver: Optional[cst.BaseExpression] = None
    obj: Optional[CheckpointObject] = None
    path: Optional[cst.BaseExpression] = None
    args_form: bool = False  # orbax args=... given
    periodic: bool = False  # inside a loop, or in a function called from a loop
    wraps: str = ""  # for a project helper: the api its body saves with

    @property
    def call(self) -> cst.Call:
        return self.record.node


@dataclass(eq=False)
class RestoreSite:
    api: str
    method: str
    record: CallRecord
    target_expr: Optional[cst.BaseExpression]
    target: str  # given | missing | unknown
    target_payload: Optional[Payload] = None
    receiver: Optional[cst.BaseExpression] = None
    obj: Optional[CheckpointObject] = None
    path: Optional[cst.BaseExpression] = None
    args_form: bool = False

    @property
    def call(self) -> cst.Call:
        return self.record.node

    @property
    def result(self) -> Optional[str]:
        target = self.record.assigned_to
        return target.value if isinstance(target, cst.Name) else None


@dataclass(eq=False)
class LegacyCall:
    """A checkpoint call in a form the installed flax/orbax consider legacy (OPX505)."""

    kind: str  # flax_checkpoints | manager_init | checkpointer_args | manager_items
    record: CallRecord
    node: cst.CSTNode
    obj: Optional[CheckpointObject] = None
    method: str = ""
