"""What optax's public callables look like, read from `rules/optax_api.toml`.

That table is generated from the installed optax by `tools/gen_optax_api.py` and
checked against it by a test, so the lint path knows signatures, defaults, alias
expansions and params requirements without ever importing optax.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Optional

from optax_lint.core.catalogue import load_table

# Clipping primitives (OPX101) and the names optax exports them under.
CLIP_PRIMITIVES = frozenset({"clip_by_global_norm", "clip", "clip_by_block_rms", "adaptive_grad_clip", "per_example_global_norm_clip", "per_example_layer_norm_clip"})
# Wrappers whose first argument is the wrapped transformation.
SINGLE_INNER_WRAPPERS = {
    "masked": "inner",
    "apply_if_finite": "inner",
    "MultiSteps": "opt",
    "flatten": "inner",
    "lookahead": "fast_optimizer",
    "conditionally_mask": "inner",
    "conditionally_transform": "inner",
}


@dataclass(frozen=True)
class ExpansionStep:
    step: str
    passed: dict[str, str] = field(default_factory=dict)  # primitive param -> alias param
    const: dict[str, Any] = field(default_factory=dict)
    when: Optional[dict[str, str]] = None
    negated: dict[str, str] = field(default_factory=dict)  # primitive param -> -alias param (sm3)
    derived: tuple[str, ...] = ()  # primitive params computed from alias args (value unknown)
    masked: bool = False  # the alias wraps this step in masked(...)


@dataclass(frozen=True)
class ApiEntry:
    key: str  # "adamw", "contrib.muon", ...
    kind: str  # alias | transform | wrapper | schedule | other
    params: tuple[str, ...]
    kwonly: tuple[str, ...]
    varargs: str
    defaults: dict[str, Any]
    none_defaults: tuple[str, ...]
    needs_params: bool
    needs_value: bool
    expansion: tuple[ExpansionStep, ...]
    branches: dict[str, tuple[ExpansionStep, ...]] = field(default_factory=dict)  # partition aliases (contrib.muon)

    @property
    def short(self) -> str:
        return self.key.rsplit(".", 1)[-1]

    def default(self, param: str) -> Any:
        """A literal default, None for a None default, KeyError when there is none."""
        if param in self.defaults:
            return self.defaults[param]
        if param in self.none_defaults:
            return None
        raise KeyError(param)


def _steps(raw_steps) -> tuple[ExpansionStep, ...]:
    return tuple(
        ExpansionStep(
            s["step"],
            dict(s.get("pass", {})),
            dict(s.get("const", {})),
            s.get("when"),
            negated=dict(s.get("pass_negated", {})),
            derived=tuple(s.get("derived", {})),
            masked=bool(s.get("masked")),
        )
        for s in raw_steps
    )


class OptaxApi:
    def __init__(self, table: dict) -> None:
        self.version = table.get("optax_version", "?")
        self.entries: dict[str, ApiEntry] = {}
        self.homes: dict[str, str] = {}
        for key, raw in table.get("callables", {}).items():
            entry = ApiEntry(
                key=key,
                kind=raw.get("kind", "other"),
                params=tuple(raw.get("params", ())),
                kwonly=tuple(raw.get("kwonly", ())),
                varargs=raw.get("varargs", ""),
                defaults=dict(raw.get("defaults", {})),
                none_defaults=tuple(raw.get("none_defaults", ())),
                needs_params=bool(raw.get("needs_params", False)),
                needs_value=bool(raw.get("needs_value", False)),
                expansion=_steps(raw.get("expansion", ())),
                branches={label: _steps(steps) for label, steps in raw.get("branches", {}).items()},
            )
            self.entries[key] = entry
            self.homes[f"optax.{key}"] = key
            for home in raw.get("homes", ()):
                self.homes[home] = key
        for old, new in table.get("aliases", {}).items():
            if new in self.entries:
                self.homes.setdefault(f"optax.{old}", new)

    def canonical(self, qualname: str) -> str:
        """'optax.schedules.warmup_cosine_decay_schedule' -> 'optax.warmup_cosine_decay_schedule'.

        Names outside optax come back unchanged, so rules can match jax/flax/orbax too.
        """
        if not qualname.startswith("optax."):
            return qualname
        key = self.homes.get(qualname)
        if key is not None:
            return f"optax.{key}"
        if qualname.startswith("optax._src.") or qualname.startswith("optax.contrib._"):
            # Private paths: map to the public object of the same name when there is one.
            last = qualname.rsplit(".", 1)[-1]
            for candidate in (last, f"contrib.{last}"):
                if candidate in self.entries:
                    return f"optax.{candidate}"
        return qualname

    def entry(self, canonical: Optional[str]) -> Optional[ApiEntry]:
        if canonical is None or not canonical.startswith("optax."):
            return None
        return self.entries.get(canonical[len("optax."):])


@functools.lru_cache(maxsize=1)
def load_api() -> OptaxApi:
    return OptaxApi(load_table("optax_api"))
