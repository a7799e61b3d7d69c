"""What a save writes, or a restore target describes (`Payload`), and what it holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from optax_lint.facts.checkpoints.vocabulary import MODEL_HOLDER_KEYS, NON_OPT_KEYS, opt_key, params_key
from optax_lint.syntax.walker import Scope


@dataclass(eq=False)
class Payload:
    """What a save writes (or a restore target describes)."""

    kind: str  # train_state | opt_state | params | dict | other | none | unknown
    node: Optional[cst.BaseExpression]
    items: dict[str, "Payload"] = field(default_factory=dict)  # dict / Composite / tuple entries
    open: bool = False  # dict with ** entries or non-literal keys: more may be inside
    composite: bool = False  # ocp.args.Composite(...)
    dict_node: Optional[cst.Dict] = None  # the dict literal, when written as one
    dict_scope: Optional[Scope] = None
    reason: str = ""

    def has_opt_state(self) -> Optional[bool]:
        """True/False when known, None when the tree may or may not hold it."""
        if self.kind in ("train_state", "opt_state"):
            return True
        if self.kind in ("params", "other", "none"):
            return False
        if self.kind != "dict":
            return None
        if self.open:
            return None
        unknown = False
        for key, item in self.items.items():
            if opt_key(key):
                return True
            if item.kind == "unknown" and key.lower() in MODEL_HOLDER_KEYS:
                unknown = True  # {'model': state}: orbax's own examples keep the whole TrainState there
                continue
            if params_key(key) and item.kind in ("params", "dict", "unknown"):
                continue  # the entry under 'params' is the parameter tree
            inner = item.has_opt_state()
            if inner:
                return True
            if inner is None and (key.isdigit() or key.lower() not in NON_OPT_KEYS):
                unknown = True
        return None if unknown else False

    def has_params(self) -> bool:
        if self.kind in ("params", "train_state"):
            return True
        if self.kind == "dict":
            return any(item.has_params() or (params_key(key) and item.kind in ("params", "dict", "unknown")) for key, item in self.items.items())
        return False

    def keys(self) -> list[str]:
        return list(self.items)
