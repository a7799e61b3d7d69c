"""Run context: what is being trained. Placeholder until the run-context work lands:
it knows only what was declared (CLI, pragma, config) and infers nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

FIELDS = ("arch", "params", "steps", "batch_per_device", "batch_global", "devices", "grad_accum", "fine_tune")


@dataclass(frozen=True)
class ContextValue:
    value: Any
    source: str  # cli | pragma | config | inferred
    location: Optional[str] = None  # "train.py:12", "pyproject.toml"
    confidence: str = "declared"  # declared | high | medium | low
    detail: str = ""


@dataclass
class RunContext:
    values: dict[str, ContextValue] = field(default_factory=dict)

    def get(self, name: str) -> Optional[ContextValue]:
        return self.values.get(name)

    def value(self, name: str) -> Any:
        entry = self.values.get(name)
        return entry.value if entry is not None else None


def build_run_context(facts) -> RunContext:
    context = RunContext()
    for name, declared in facts.declared_context.items():
        value, source = declared if isinstance(declared, tuple) else (declared, "cli")
        context.values[name] = ContextValue(value, source)
    return context
