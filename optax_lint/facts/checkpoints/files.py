"""Where a save writes and a restore reads when the call takes a file or bytes: the path
opened for `f` in `pickle.dump(x, f)`, `f.write(to_bytes(x))`, `from_bytes(t, f.read())`;
and saves that write a numbered series of snapshots, or keep the best by a metric, rather
than one resume point."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from optax_lint.facts.checkpoints.vocabulary import POSITION_KEY
from optax_lint.facts.parallel.calls import keyword_arg
from optax_lint.syntax.arguments import call_arg_expr
from optax_lint.syntax.names import lookup
from optax_lint.syntax.nodes import last_name, node_text
from optax_lint.syntax.values import value_of
from optax_lint.syntax.walker import CallRecord, Scope, walk


def file_path(facts, expr: Optional[cst.BaseExpression], scope: Scope, record: CallRecord) -> Optional[cst.BaseExpression]:
    """`f` of `with open(path, 'wb') as f` -> `path` (or the expression itself)."""
    if not isinstance(expr, cst.Name):
        return expr
    # The `with` that encloses this call and binds the name wins over other bindings.
    statement: Optional[cst.CSTNode] = record.statement
    for _ in range(32):
        if statement is None or statement is facts.raw.module:
            break
        if isinstance(statement, cst.With):
            for item in statement.items:
                if item.asname is not None and isinstance(item.asname.name, cst.Name) and item.asname.name.value == expr.value:
                    return opened_path(facts, item.item, scope) or expr
        statement = facts.raw.parent_stmt.get(statement)
    _, bindings = lookup(expr.value, scope)
    if len(bindings) == 1 and isinstance(bindings[0].value, cst.Call):
        return opened_path(facts, bindings[0].value, bindings[0].scope) or expr
    return expr


def opened_path(facts, opened: cst.BaseExpression, scope: Scope) -> Optional[cst.BaseExpression]:
    if not isinstance(opened, cst.Call):
        return None
    name = facts.canonical(opened.func, scope)
    if name in ("io.open", "gzip.open", "tensorflow.io.gfile.GFile", "builtins.open") or (
        isinstance(opened.func, cst.Name) and opened.func.value == "open" and not lookup("open", scope)[1]
    ):
        return call_arg_expr(opened, 0, "file", strict=True)
    if isinstance(opened.func, cst.Attribute) and opened.func.attr.value == "open":
        return opened.func.value  # pathlib / epath: path.open("wb")
    return None


def written_to(facts, record: CallRecord) -> Optional[cst.BaseExpression]:
    parent = record.parent_call
    if parent is not None and isinstance(parent.func, cst.Attribute) and parent.func.attr.value in ("write", "write_bytes"):
        if parent.func.attr.value == "write_bytes":
            return parent.func.value
        return file_path(facts, parent.func.value, record.scope, record)
    return None


def read_from(facts, call: cst.Call, scope: Scope, record: CallRecord) -> Optional[cst.BaseExpression]:
    """Where the bytes given to from_bytes/loads come from: `f.read()` -> f's path."""
    for arg in call.args:
        value = arg.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("read", "read_bytes"):
            if value.func.attr.value == "read_bytes":
                return value.func.value
            return file_path(facts, value.func.value, scope, record)
    return None


# Words that name a dataset in a plain load's path or result, and words that name a
# checkpoint: a load is a data read when something says data and nothing says checkpoint.
_DATA_WORDS = re.compile(r"data|trajector|episode|transition|buffer|replay|demonstration|corpus|token|vocab|label|sample|feature", re.IGNORECASE)
_CHECKPOINT_WORDS = re.compile(r"ckpt|checkpoint|param|weight|model|state|snapshot|policy|net|resume|save|opt", re.IGNORECASE)


def reads_data(facts, record: CallRecord, path: Optional[cst.BaseExpression]) -> bool:
    """A plain load (pickle, np.load) that reads a dataset, not a checkpoint:
    `trajectories = pickle.load(f)` from `open(args.dataset_path, "rb")`. Judged from the
    path as written and the names the result is bound to; a name that could be a
    checkpoint's (`params`, `ckpt_path`) keeps it a restore."""
    words = [node_text(path)] if path is not None else []
    statement = record.statement
    body = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and statement.body else None
    if isinstance(body, (cst.Assign, cst.AnnAssign)) and body.value is record.node:
        targets = [t.target for t in body.targets] if isinstance(body, cst.Assign) else [body.target]
        words += [node_text(t) for t in targets]
    if not words or any(_CHECKPOINT_WORDS.search(w) for w in words):
        return False
    return any(_DATA_WORDS.search(w) for w in words)


# Calls that read a written file to look at the model, not to resume training.
_EVALUATION = re.compile(r"eval|test|predict|render|rollout|play|enjoy|visuali[sz]e", re.IGNORECASE)


def read_back_for_evaluation(facts, record: CallRecord, path: Optional[cst.BaseExpression]) -> bool:
    """The file a save writes (`model_path`) is handed, later in the same function, to a
    call named for evaluation (`evaluate(model_path, ...)`): a snapshot written to
    evaluate the model, read back at once, not a checkpoint to resume from."""
    if not isinstance(path, cst.Name):
        return False
    after = facts.source_positions.span(record.node).line
    for other in facts.raw.calls:
        if other.scope is not record.scope or not _EVALUATION.search(last_name(other.node.func)):
            continue
        if facts.source_positions.span(other.node).line <= after:
            continue
        if any(isinstance(arg.value, cst.Name) and arg.value.value == path.value for arg in other.node.args):
            return True
    return False


# flax's `keep` at or above this never deletes a snapshot in any real run: every saved
# step stays (as `keep=1_000_000` for a sampler that reads chosen epochs back).
_KEEP_ALL = 10_000


def snapshot_series(facts, site) -> bool:
    """A save that writes a numbered series of snapshots, all kept, where a resume
    checkpoint keeps the latest one or few: a flax save told to keep every step
    (`keep=1e6`; flax's default is 1), or an orbax checkpointer writing each save to a
    directory of its own (`directory_per_save`)."""
    if site.api == "flax_checkpoints":
        arg = keyword_arg(site.call, "keep")
        if arg is None:
            return False
        value = value_of(arg.value, site.record.scope)
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= _KEEP_ALL
    return directory_per_save(facts, site)


def directory_per_save(facts, site) -> bool:
    """An orbax checkpointer (not a CheckpointManager, which keeps its own few) writing
    each save to a path built from a loop's counter (`f"ckpt/epoch{epoch}_step{step}"`):
    one numbered directory per save, all kept, like flax's keep-all, when what it writes
    does not record the run's position (a step or an epoch entry marks a resume point)."""
    if site.api != "orbax" or site.path is None or "CheckpointManager" in site.method:
        return False
    if any(POSITION_KEY.search(key) for key in site.payload.keys()):
        return False  # it records where the run stands ('step', 'epoch'): a point to resume from
    scope = site.record.scope
    path = site.path
    if isinstance(path, cst.Name):
        _, bindings = lookup(path.value, scope)
        reaching = facts.raw.reaching_binding(bindings, site.record.statement) if bindings else None
        if reaching is None or reaching.kind != "assign" or reaching.value is None:
            return False
        path = reaching.value
    for part in walk(path):
        if isinstance(part, cst.Name):
            _, bindings = lookup(part.value, scope)
            if bindings and all(b.kind == "for" for b in bindings):
                return True
    return False


def manager_keeps_best(site) -> bool:
    """An orbax CheckpointManager built with `best_fn` in its options
    (`CheckpointManagerOptions(best_fn=lambda m: m["val_loss"], max_to_keep=1)`): orbax
    keeps the best checkpoints by the metric and deletes the rest, the latest among
    them, so the directory holds the selected model, as a save under `if acc > best:`
    does, not the point a run resumes from."""
    obj = site.obj
    if site.api != "orbax" or obj is None or obj.kind != "manager" or obj.call is None or obj.record is None:
        return False
    for arg in obj.call.args:
        value = arg.value
        if isinstance(value, cst.Name):
            _, bindings = lookup(value.value, obj.record.scope)
            value = bindings[0].value if len(bindings) == 1 and bindings[0].kind == "assign" else None
        if isinstance(value, cst.Call) and last_name(value.func) == "CheckpointManagerOptions" and keyword_arg(value, "best_fn") is not None:
            return True
    return False
