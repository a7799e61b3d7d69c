"""Whether a save and a restore use the same checkpoint: the same manager (by the
directory it was built on, or the variable holding it), or paths built from the same
variables."""

from __future__ import annotations

import libcst as cst

from optax_lint.syntax.arguments import call_arg_expr
from optax_lint.syntax.nodes import node_text
from optax_lint.syntax.walker import iter_children


def _keys(site) -> dict:
    """What identifies where a site writes or reads. Managers: the directory the
    manager was built on (when its construction is known) and the variable holding
    it; path-based saves: the variables their path is built from."""
    keys: dict = {}
    if site.api == "orbax" and (site.obj is None or site.obj.kind == "manager"):
        if site.receiver is not None:
            keys["obj"] = node_text(site.receiver)
        if site.obj is not None and site.obj.call is not None:
            directory = call_arg_expr(site.obj.call, 0, "directory", strict=True)
            if directory is not None:
                keys["dir"] = frozenset(anchors(directory))
        return keys
    if site.path is not None:
        keys["path"] = frozenset(anchors(site.path))
    return keys


def same_target(a, b) -> bool:
    ka, kb = _keys(a), _keys(b)
    if "dir" in ka and "dir" in kb:
        return a.obj is b.obj or bool(ka["dir"] & kb["dir"])
    if "obj" in ka and "obj" in kb:
        return ka["obj"] == kb["obj"]
    if "path" in ka and "path" in kb:
        return bool(ka["path"] & kb["path"])
    return False


# Names in a path expression that say nothing about *which* checkpoint it is.
_PATH_NOISE = frozenset(
    {"step", "i", "epoch", "latest", "latest_step", "ckpt_step", "it", "n", "global_step", "start", "start_step",
     "True", "False", "None"}
)


def anchors(expr: cst.CSTNode, depth: int = 0) -> set[str]:
    """The variables a path is built from: `os.path.join(config.workdir, f"step_{step}")`
    -> {'config.workdir'}. Callees (`os.path.join`) and step counters are left out."""
    if depth > 12:
        return set()
    if isinstance(expr, cst.Name):
        return set() if expr.value in _PATH_NOISE else {expr.value}
    if isinstance(expr, cst.Attribute):
        return {node_text(expr)}
    if isinstance(expr, cst.Call):
        out: set[str] = set()
        for arg in expr.args:
            out |= anchors(arg.value, depth + 1)
        if isinstance(expr.func, cst.Attribute) and not isinstance(expr.func.value, cst.Name):
            out |= anchors(expr.func.value, depth + 1)  # Path(d).joinpath(...) / d.joinpath(...)
        elif isinstance(expr.func, cst.Attribute) and expr.func.value.value not in ("os", "pathlib", "epath", "tf", "gfile"):
            out |= anchors(expr.func.value, depth + 1)
        return out
    out = set()
    for child in iter_children(expr):
        out |= anchors(child, depth + 1)
    return out
