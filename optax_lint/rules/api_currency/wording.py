"""How the API-currency rules word a table entry: its state in the tabled versions, the
advice, the severity."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from optax_lint.core.diagnostics import Severity
from optax_lint.facts.api_currency import CurrencyTable, Entry
from optax_lint.rules.api_currency.rewrites import literal
from optax_lint.syntax.nodes import node_code, node_text

_WHEN = {
    "access": "on access",
    "import": "on import",
    "call": "when called",
}


def exception_name(observed: str) -> str:
    return observed.split(":", 1)[0] if ":" in observed else observed


def state_text(entry: Entry, table: CurrencyTable) -> str:
    version = table.version_of(entry.path)
    if entry.status == "removed":
        return f"was removed ({exception_name(entry.observed)} in {version})"
    if entry.trigger == "doc":
        since = f" since {entry.library} {entry.since}" if entry.since else ""
        return f"is deprecated{since} (documented; {version} does not warn)"
    return f"is deprecated (DeprecationWarning {_WHEN.get(entry.trigger, 'on use')}, {version})"


def advice_text(entry: Entry) -> str:
    if entry.hint:
        return entry.hint
    if entry.replacement and entry.call is not None and entry.call.add:
        extra = ", ".join(f"{k}={node_code(literal(v))}" for k, v in entry.call.add.items())
        return f"use {entry.replacement}(..., {extra})"
    if entry.replacement:
        return f"use {entry.replacement}"
    return "it has no direct replacement"


def severity(removed: bool, older: Optional[str] = None) -> Severity:
    """An error when the API is gone (it raises), unless the code targets an older
    release (`older` names it) where it still runs: then a warning."""
    return Severity.ERROR if removed and older is None else Severity.WARNING


def upgrade_advice(advice: str, older: Optional[str]) -> str:
    """The advice, or, when the code targets an older release where the replacement may
    not exist yet, the advice for the upgrade."""
    return advice if older is None else f"when you upgrade past it, {advice}"


def code_text(node: cst.CSTNode, limit: int = 60) -> str:
    """Source text of a node for messages, receiver included (`optimizer.update(grads)`)."""
    text = node_text(node)
    if len(text) <= limit:
        return text
    if isinstance(node, cst.Call):
        return code_text(node.func, limit) + "(...)"
    return text[:limit] + "..."
