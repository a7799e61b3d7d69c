"""Devices and batch size (the `devices`, `batch_per_device`, `batch_global` fields):
`--xla_force_host_platform_device_count=N`, literal mesh shapes; a file with
pmap/shard_map/mesh code whose device count is known only at run time stays unknown;
a training loop with no multi-device code at all runs on 1 device. The batch from
`global_batch_size` / `per_device_batch_size` names; a plain `batch_size` is global
when the code divides it by the device count, per-device when it multiplies it, and
both on one device."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.context.evidence import Evidence, last_name, positive_int
from optax_lint.facts.context.loops import training_loops
from optax_lint.facts.context.run_context import ContextValue
from optax_lint.facts.project.found import Found, weaker

GLOBAL_BATCH_NAMES = frozenset({"global_batch_size", "total_batch_size", "effective_batch_size", "global_batch"})
PER_DEVICE_BATCH_NAMES = frozenset(
    {"per_device_batch_size", "batch_size_per_device", "per_device_train_batch_size", "device_batch_size", "per_core_batch_size", "batch_per_device", "per_device_batch"}
)
PLAIN_BATCH_NAMES = frozenset({"batch_size", "train_batch_size", "batch"})
_MULTI_DEVICE_CALLS = frozenset(
    {
        "jax.pmap", "jax.pjit", "jax.experimental.pjit.pjit", "jax.shard_map", "jax.experimental.shard_map.shard_map",
        "jax.device_count", "jax.local_device_count", "jax.make_mesh", "jax.sharding.Mesh", "jax.sharding.NamedSharding",
        "jax.sharding.PositionalSharding", "jax.experimental.mesh_utils.create_device_mesh", "flax.jax_utils.replicate",
        "jax.lax.pmean", "jax.lax.psum", "jax.experimental.maps.Mesh", "jax.smap",
    }
)
_DEVICES = r"(?:jax\.)?(?:local_)?device_count\(\)|n_devices|num_devices|n_dev|ndev|device_count|num_local_devices"
_BATCH_WORD = re.compile(r"batch_size", re.IGNORECASE)
_DIVIDED = re.compile(rf"\s*(?://|/|%)\s*\(?\s*(?:{_DEVICES})", re.IGNORECASE)
_MULTIPLIED_AFTER = re.compile(rf"\s*\*\s*(?:{_DEVICES})", re.IGNORECASE)
_MULTIPLIED_BEFORE = re.compile(rf"(?:{_DEVICES})\s*\*\s*[\w.]*$", re.IGNORECASE)
_XLA_DEVICES = re.compile(r"xla_force_host_platform_device_count\s*=\s*(\d+)")


def infer_devices(inf: Evidence, context) -> Optional[ContextValue]:
    facts = inf.facts
    text = facts.text or ""
    match = _XLA_DEVICES.search(text)
    if match:
        line = text.count("\n", 0, match.start()) + 1
        return ContextValue(int(match.group(1)), "inferred", f"{facts.display_path}:{line}", "high", "--xla_force_host_platform_device_count")
    for name in ("jax.make_mesh", "jax.experimental.mesh_utils.create_device_mesh", "jax.sharding.Mesh", "jax.experimental.maps.Mesh"):
        for record in facts.calls_by_name.get(name, ()):
            shape = _arg_expr(record.node, 0, "axis_shapes" if name == "jax.make_mesh" else ("mesh_shape" if "create" in name else "devices"))
            if name.endswith("Mesh") and isinstance(shape, cst.Call) and last_name(shape.func) == "create_device_mesh" and shape.args:
                shape = shape.args[0].value
            elif name.endswith("Mesh") and isinstance(shape, cst.Call) and last_name(shape.func) == "reshape":
                shape = cst.Tuple([cst.Element(a.value) for a in shape.args]) if len(shape.args) > 1 else shape.args[0].value if shape.args else None
            if shape is None:
                continue
            found = inf.ev.eval(shape, record.scope)
            if isinstance(found, Found) and isinstance(found.value, (tuple, list)) and found.value and all(
                positive_int(v) for v in found.value
            ):
                product = 1
                for v in found.value:
                    product *= int(v)
                return ContextValue(product, "inferred", None, found.confidence, f"mesh shape {tuple(found.value)}", locate=inf.here(record.node).location)
    marker = _multi_device_marker(inf)
    if marker is not None:
        name, node = marker
        origin = inf.here(node)
        inf.note("devices", lambda: f"multi-device code ({name} at {origin.location()}); the device count is known only at run time")
        return None
    loops = training_loops(inf)
    if loops and facts.update_sites:
        loop, _ = loops[0]
        return ContextValue(1, "inferred", None, "medium", "training loop with no pmap/shard_map/mesh code", locate=inf.here(loop.node).location)
    inf.note("devices", "no training loop in this file")
    return None


def _multi_device_marker(inf: Evidence) -> Optional[tuple[str, cst.CSTNode]]:
    facts = inf.facts
    for record in facts.raw.calls:
        name = facts.callee(record)
        if name in _MULTI_DEVICE_CALLS:
            return name, record.node
        if name == "functools.partial" and record.node.args:
            inner = facts.canonical(record.node.args[0].value, record.scope)
            if inner in _MULTI_DEVICE_CALLS:
                return inner, record.node
    for fn, scope in facts.raw.functions.items():
        for decorator in fn.decorators:
            name = facts.canonical(decorator.decorator, scope.parent or scope)
            if name in _MULTI_DEVICE_CALLS:
                return name, decorator
    return None


def _plain_batch_role(inf: Evidence) -> Optional[str]:
    """'global' when the code divides `batch_size` by the device count, 'per_device'
    when it multiplies it; read from the text around each mention (cheap)."""
    text = inf.facts.text or ""
    for match in _BATCH_WORD.finditer(text):
        after = text[match.end() : match.end() + 48]
        before = text[max(0, match.start() - 48) : match.start()]
        if _DIVIDED.match(after):
            return "global"
        if _MULTIPLIED_AFTER.match(after) or _MULTIPLIED_BEFORE.search(before):
            return "per_device"
    return None


def infer_batch_per_device(inf: Evidence, context) -> Optional[ContextValue]:
    found = inf.named(PER_DEVICE_BATCH_NAMES)
    if isinstance(found, Found):
        return inf.value(found, value=int(found.value))
    plain = inf.named(PLAIN_BATCH_NAMES)
    role = _plain_batch_role(inf)
    devices = context.get("devices")
    if isinstance(plain, Found):
        if role == "per_device":
            return inf.value(plain, value=int(plain.value), detail=f"{plain.detail} (multiplied by the device count)")
        if devices is not None and devices.value == 1:
            confidence = weaker(plain.confidence, devices.confidence if devices.source == "inferred" else "high")
            return inf.value(plain, value=int(plain.value), detail=f"{plain.detail} (one device)", confidence=confidence)
    glob = context.get("batch_global")
    if glob is not None and devices is not None and glob.value % devices.value == 0:
        conf = weaker(glob.confidence if glob.source == "inferred" else "high", devices.confidence if devices.source == "inferred" else "high")
        return ContextValue(glob.value // devices.value, "inferred", None, conf, f"batch_global {glob.value} / devices {devices.value}", locate=lambda: glob.location)
    if isinstance(plain, Found) and role is None:
        inf.note("batch_per_device", f"{plain.detail} = {plain.value}: per-device or global is unclear without a known device count")
    elif glob is not None:
        inf.note("batch_per_device", f"batch_global is {glob.value}, but the device count is unknown")
    else:
        inf.note("batch_per_device", "no batch size found")
    return None


def infer_batch_global(inf: Evidence, context) -> Optional[ContextValue]:
    found = inf.named(GLOBAL_BATCH_NAMES)
    if isinstance(found, Found):
        return inf.value(found, value=int(found.value))
    plain = inf.named(PLAIN_BATCH_NAMES)
    role = _plain_batch_role(inf)
    devices = context.get("devices")
    if isinstance(plain, Found) and role == "global":
        return inf.value(plain, value=int(plain.value), detail=f"{plain.detail} (divided by the device count)")
    if isinstance(plain, Found) and devices is not None and devices.value == 1:
        confidence = weaker(plain.confidence, devices.confidence if devices.source == "inferred" else "high")
        return inf.value(plain, value=int(plain.value), detail=f"{plain.detail} (one device)", confidence=confidence)
    per_device = context.get("batch_per_device")
    if per_device is not None and devices is not None:
        conf = weaker(per_device.confidence if per_device.source == "inferred" else "high", devices.confidence if devices.source == "inferred" else "high")
        return ContextValue(
            per_device.value * devices.value, "inferred", None, conf,
            f"batch_per_device {per_device.value} x devices {devices.value}", locate=lambda: per_device.location,
        )
    if isinstance(plain, Found) and role is None:
        inf.note("batch_global", f"{plain.detail} = {plain.value}: per-device or global is unclear without a known device count")
    elif per_device is not None:
        inf.note("batch_global", f"batch_per_device is {per_device.value}, but the device count is unknown")
    else:
        inf.note("batch_global", "no batch size found")
    return None


def _arg_expr(call: cst.Call, position: int, keyword: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position].value if position < len(positional) else None
