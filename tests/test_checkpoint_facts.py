"""Extraction tests for optax_lint/facts/checkpoints/ (save/restore sites, payloads,
restore targets, legacy forms, data flow) and a few rule-level near-misses."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from optax_lint.engine import lint as engine
from optax_lint.facts.checkpoints.flow import Flow
from optax_lint.facts.module import ModuleFacts

HEADER = """\
import os
import pickle
import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from flax import jax_utils, serialization
from flax.training import checkpoints
from flax.training.train_state import TrainState

tx = optax.adam(1e-3)
"""


def facts(src: str) -> ModuleFacts:
    return ModuleFacts(cst.parse_module(HEADER + textwrap.dedent(src)), "x.py")


def ckpt(src: str):
    return facts(src).checkpoints


def codes(src: str, select=("OPX501", "OPX502", "OPX503", "OPX504", "OPX505")) -> list[tuple[int, str]]:
    text = HEADER + textwrap.dedent(src)
    run = engine.lint_text(text, "x.py", set(select))
    assert run.internal_errors == 0, [f.message for f in run.findings]
    offset = HEADER.count("\n")
    return [(f.span.line - offset, f.code) for f in run.findings]


# -- save sites and payloads --------------------------------------------------------


def test_manager_save_dict_literal_keys():
    c = ckpt(
        """
        mngr = ocp.CheckpointManager("/tmp/x")
        mngr.save(1, args=ocp.args.StandardSave({"params": params, "step": 1}))
        """
    )
    (site,) = c.saves
    assert site.api == "orbax" and site.method == "CheckpointManager.save" and site.args_form
    assert site.payload.kind == "dict" and site.payload.keys() == ["params", "step"]
    assert site.payload.has_params() and site.payload.has_opt_state() is False


def test_payload_kinds():
    c = ckpt(
        """
        def make(model, rng):
            return TrainState.create(apply_fn=model.apply, params=model.init(rng)["params"], tx=tx)

        state = make(None, None)
        params = state.params
        opt_state = tx.init(params)
        ckptr = ocp.PyTreeCheckpointer()
        ckptr.save("a", state)
        ckptr.save("b", state.params)
        ckptr.save("c", jax.device_get(jax_utils.unreplicate(state)))
        ckptr.save("d", {"params": params, "opt_state": opt_state})
        ckptr.save("e", (params, opt_state))
        ckptr.save("f", (params, 3))
        ckptr.save("g", {"params": params, **extra})
        ckptr.save("h", {"params": params, "mystery": thing})
        ckptr.save("i", opt_state)
        ckptr.save("j", {"model": mystery_state})
        ckptr.save("k", {"params": mystery_tree})
        """
    )
    by_path = {s.path.value.strip('"'): s.payload for s in c.saves}
    assert by_path["a"].kind == "train_state" and by_path["a"].has_opt_state()
    assert by_path["b"].kind == "params" and by_path["b"].has_opt_state() is False
    assert by_path["c"].kind == "train_state"
    assert by_path["d"].has_opt_state() is True
    assert by_path["e"].has_opt_state() is True
    assert by_path["f"].has_opt_state() is False and by_path["f"].has_params()
    assert by_path["g"].has_opt_state() is None  # ** entries: unknown
    assert by_path["h"].has_opt_state() is None  # unknown value under an unknown key
    assert by_path["i"].kind == "opt_state"
    # 'model' may hold the whole TrainState (orbax's examples save {'model': state});
    # an unknown tree under 'params' is the parameter tree
    assert by_path["j"].has_opt_state() is None
    assert by_path["k"].has_opt_state() is False


def test_composite_items():
    c = ckpt(
        """
        mngr = ocp.CheckpointManager("/tmp/x", item_names=("state", "metadata"))
        state = TrainState.create(apply_fn=None, params={}, tx=tx)
        mngr.save(1, args=ocp.args.Composite(state=ocp.args.StandardSave(state), metadata=ocp.args.JsonSave({"a": 1})))
        mngr.save(2, args=ocp.args.Composite(params=ocp.args.StandardSave(state.params), metadata=ocp.args.JsonSave({})))
        """
    )
    first, second = c.saves
    assert first.payload.composite and first.payload.has_opt_state() is True
    assert second.payload.composite and second.payload.has_opt_state() is False and second.payload.has_params()


def test_threaded_state_keeps_its_kind():
    c = ckpt(
        """
        def train(batches, mngr):
            state = TrainState.create(apply_fn=None, params={}, tx=tx)
            state = jax_utils.replicate(state)
            for batch in batches:
                state, metrics = p_step(state, batch)
                state = state.replace(step=state.step)
            mngr.save(1, args=ocp.args.StandardSave(jax_utils.unreplicate(state)))
        """
    )
    (site,) = c.saves
    assert site.payload.kind == "train_state"
    assert site.obj is None  # a manager passed in: known to be orbax from args=


def test_pickle_numpy_and_serialization_sites_with_paths():
    c = ckpt(
        """
        def loop(params, path):
            for i in range(3):
                with open(path, "wb") as f:
                    pickle.dump(params, f)
                with open(path + ".msgpack", "wb") as g:
                    g.write(serialization.to_bytes(params))
                np.save(os.path.join(path, "w.npy"), params)
            with open(path, "rb") as f:
                restored = pickle.load(f)
            return restored
        """
    )
    kinds = [(s.api, s.method) for s in c.saves]
    assert kinds == [("pickle", "pickle.dump"), ("flax_serialization", "serialization.to_bytes"), ("numpy", "np.save")]
    assert all(c.in_loop(s.record) for s in c.saves)
    assert [cst.Module([]).code_for_node(s.path) for s in c.saves[:2]] == ["path", 'path + ".msgpack"']
    (restore,) = c.restores
    assert restore.api == "pickle" and cst.Module([]).code_for_node(restore.path) == "path"
    assert c.same_target(c.saves[0], restore)


def test_in_loop_through_helper_functions():
    c = ckpt(
        """
        def save(mngr, state, step):
            mngr.save(step, args=ocp.args.StandardSave(state))

        def maybe_save(mngr, state, step):
            if step % 10 == 0:
                save(mngr, state, step)

        def export(params):
            ocp.StandardCheckpointer().save("/tmp/final", params)

        def train(mngr, state):
            for step in range(100):
                maybe_save(mngr, state, step)
            export(state.params)
        """
    )
    periodic = {s.method: c.in_loop(s.record) for s in c.saves}
    assert periodic == {"orbax.save": True, "StandardCheckpointer.save": False}


# -- restores and targets ---------------------------------------------------------------


@pytest.mark.parametrize(
    "call, target",
    [
        ("mngr.restore(step)", "missing"),
        ("mngr.restore(step, args=ocp.args.StandardRestore())", "missing"),
        ("mngr.restore(step, args=ocp.args.StandardRestore(abstract))", "given"),
        ("mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))", "given"),
        ("mngr.restore(step, args=ocp.args.Composite(state=None))", "missing"),
        ("mngr.restore(step, items=abstract)", "given"),
        ("std.restore(path)", "missing"),
        ("std.restore(path, abstract)", "given"),
        ("pt.restore(path, item=abstract)", "given"),
        ("pt.restore(path, restore_args=ra)", "unknown"),
        ("checkpoints.restore_checkpoint(workdir, None)", "missing"),
        ("checkpoints.restore_checkpoint(workdir, state)", "given"),
        ("checkpoints.restore_checkpoint(workdir, target=state)", "given"),
    ],
)
def test_restore_targets(call, target):
    c = ckpt(
        f"""
        mngr = ocp.CheckpointManager("/tmp/x")
        std = ocp.StandardCheckpointer()
        pt = ocp.PyTreeCheckpointer()
        restored = {call}
        """
    )
    (site,) = c.restores
    assert site.target == target
    assert site.result == "restored"


def test_with_bound_manager_and_annotation():
    c = ckpt(
        """
        def f(directory, other: ocp.CheckpointManager):
            with ocp.CheckpointManager(directory) as mngr:
                mngr.restore(1)
            other.restore(2)
        """
    )
    assert [r.obj.kind for r in c.restores] == ["manager", "manager"]


def test_unknown_receivers_without_args_are_not_sites():
    c = ckpt(
        """
        def f(model, trainer, path):
            model.save(path)
            trainer.restore(path)
            trainer.save(path, args=ocp.args.StandardSave(model))
        """
    )
    assert [s.method for s in c.saves] == ["orbax.save"]
    assert c.restores == []


def test_legacy_forms():
    c = ckpt(
        """
        legacy = ocp.CheckpointManager("/tmp/x", ocp.PyTreeCheckpointer())
        legacy.save(1, {"a": 1})
        kw = ocp.CheckpointManager("/tmp/y", checkpointers=ocp.PyTreeCheckpointer())
        modern = ocp.CheckpointManager("/tmp/z")
        modern.save(1, args=ocp.args.StandardSave({"a": 1}))
        modern.save(2, {"a": 1})
        pt = ocp.PyTreeCheckpointer()
        pt.save("p", {"a": 1})
        pt.save("q", args=ocp.args.PyTreeSave({"a": 1}))
        pt.restore("p")
        std = ocp.StandardCheckpointer()
        std.save("s", {"a": 1})
        std.restore("s")
        checkpoints.save_checkpoint("/tmp/w", {"a": 1}, 0)
        """
    )
    kinds = [(l.kind, l.method) for l in c.legacy]
    assert kinds == [
        ("manager_init", "CheckpointManager"),
        ("manager_init", "CheckpointManager"),
        ("manager_items", "CheckpointManager.save"),
        ("checkpointer_args", "PyTreeCheckpointer.save"),
        ("checkpointer_args", "PyTreeCheckpointer.restore"),
        ("flax_checkpoints", "flax.training.checkpoints.save_checkpoint"),
    ]


def test_import_aliases_resolve():
    f = ModuleFacts(
        cst.parse_module(
            textwrap.dedent(
                """
                import optax
                from orbax import checkpoint as orbax_checkpoint
                from orbax.checkpoint import checkpoint_manager
                from flax.training.checkpoints import save_checkpoint
                tx = optax.sgd(0.1)
                m = checkpoint_manager.CheckpointManager("/tmp/x")
                m.save(1, args=orbax_checkpoint.args.StandardSave(params))
                save_checkpoint("/tmp/y", params, 0)
                """
            )
        ),
        "x.py",
    )
    c = f.checkpoints
    assert [s.method for s in c.saves] == ["CheckpointManager.save", "checkpoints.save_checkpoint"]
    assert all(s.payload.kind == "params" for s in c.saves)


def test_local_module_named_orbax_is_not_orbax():
    f = ModuleFacts(
        cst.parse_module("from myproject import orbax\nimport optax\nm = orbax.checkpoint.CheckpointManager('/x')\nm.save(1, {'params': p})\n"),
        "x.py",
    )
    c = f.checkpoints
    assert c.objects == [] and c.saves == [] and c.legacy == []


# -- data flow ------------------------------------------------------------------------------


def test_flow_follows_selection_and_step_functions():
    src = """
        @jax.jit
        def train_step(params, opt_state, batch):
            grads = jax.grad(loss)(params, batch)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state

        def resume(directory):
            mngr = ocp.CheckpointManager(directory)
            restored = mngr.restore(mngr.latest_step())
            params, opt_state = restored["params"], restored["opt_state"]
            params = jax_utils.replicate(params)
            return train_step(params, opt_state, None)
        """
    f = facts(src)
    c = f.checkpoints
    (restore,) = c.restores
    flow = Flow(c, restore.record.scope, {"restored": ()})
    assert flow.tracked["opt_state"] == ("opt_state",)
    assert flow.tracked["params"] == ("params",)
    kinds = {(u.kind, u.path) for u in flow.uses()}
    assert ("update_state", ("opt_state",)) in kinds


# -- rule-level near misses -------------------------------------------------------------


def test_opx501_one_off_export_is_silent_and_loop_save_fires():
    src = """
        def train(params, batches, path):
            opt_state = tx.init(params)
            for batch in batches:
                updates, opt_state = tx.update(batch, opt_state, params)
                params = optax.apply_updates(params, updates)
            with open(path, "wb") as f:
                pickle.dump(params, f)
            return params
        """
    assert codes(src) == []
    looped = src.replace("            with open(path", "                with open(path").replace(
        "                pickle.dump", "                    pickle.dump"
    )
    # in the loop, but nothing is ever read back: snapshots for other programs
    assert codes(looped) == []
    resumed = looped.replace(
        "            opt_state = tx.init(params)\n",
        "            if os.path.exists(path):\n"
        "                with open(path, 'rb') as f:\n"
        "                    params = pickle.load(f)\n"
        "            opt_state = tx.init(params)\n",
    )
    assert resumed != looped
    assert codes(resumed) == [(11, "OPX501")]


def test_opx501_silent_without_an_optimizer():
    convert = """
        def convert(all_params):
            for name, params in all_params.items():
                ocp.StandardCheckpointer().save(f"/tmp/{name}", params)
        """
    assert codes(convert, ("OPX501",)) == []  # no optimizer in the file: nothing to lose
    training = convert + """
        def train(params):
            return tx.init(params)
        """
    assert codes(training, ("OPX501",)) == [(4, "OPX501")]


def test_opx501_second_save_with_opt_state_keeps_silent():
    assert codes(
        """
        def train(params, opt_state, batches, d):
            for step, batch in enumerate(batches):
                np.save(os.path.join(d, "params.npy"), params)
                np.save(os.path.join(d, "opt_state.npy"), opt_state)
        """
    ) == []


def test_opx502_finetune_is_silent_resume_fires():
    resume = """
        def main(model, batches):
            mngr = ocp.CheckpointManager("/tmp/run")
            restored = mngr.restore(mngr.latest_step())
            state = TrainState.create(apply_fn=model.apply, params=restored["params"], tx=tx)
            for batch in batches:
                state = state.apply_gradients(grads=batch)
                mngr.save(int(state.step), args=ocp.args.StandardSave(state))
        """
    assert codes(resume, ("OPX502",)) == [(5, "OPX502")]
    finetune = resume.replace(
        "restored = mngr.restore", "pretrained = ocp.CheckpointManager('/tmp/base')\n            restored = pretrained.restore"
    )
    assert codes(finetune, ("OPX502",)) == []
    with_opt = resume.replace(
        "tx=tx)\n", "tx=tx)\n            state = state.replace(opt_state=restored[\"opt_state\"])\n"
    )
    assert codes(with_opt, ("OPX502",)) == []


def test_opx503_params_only_use_is_silent():
    assert codes(
        """
        def evaluate(mngr: ocp.CheckpointManager, model, x):
            restored = mngr.restore(mngr.latest_step())
            return model.apply({"params": restored["params"]}, x)
        """,
        ("OPX503",),
    ) == []


def test_opx503_opt_state_keyword():
    assert codes(
        """
        def resume(mngr: ocp.CheckpointManager, state):
            restored = mngr.restore(mngr.latest_step())
            return state.replace(params=restored["params"], opt_state=restored["opt_state"])
        """,
        ("OPX503",),
    ) == [(3, "OPX503")]


def test_opx504_nnx_and_non_optax_updates_are_silent():
    assert codes(
        """
        from flax import nnx

        def step(model, optimizer, grads, logger, metrics, state):
            optimizer.update(model, grads)
            logger.update(1, metrics)
            metrics.update(loss=1.0)
            state.apply_gradients(grads)
            "a-b".replace("-", "_")
        """,
        ("OPX504",),
    ) == []


def test_opx504_fix_not_offered_for_globals():
    text = HEADER + textwrap.dedent(
        """
        params = {}

        def step(updates):
            optax.apply_updates(params, updates)
        """
    )
    run = engine.lint_text(text, "x.py", {"OPX504"})
    (finding,) = run.findings
    assert finding.fix is None or finding.fix.apply is None


def test_composite_built_from_kwargs_is_unknown_and_user_subclass_is_not_orbax():
    c = ckpt(
        """
        class CheckpointManager(ocp.CheckpointManager):
            def save(self, step, items, **kwargs):
                return super().save(step, args=ocp.args.StandardSave(items), **kwargs)

        def resume(directory, restore_specs, step):
            mngr = ocp.CheckpointManager(directory)
            restore_args = {"opt_state": ocp.args.StandardRestore(restore_specs)}
            ckpt_state = mngr.restore(step, args=ocp.args.Composite(**restore_args))
            mine = CheckpointManager(directory)
            mine.save(step, {"params": 1})
            return ckpt_state["opt_state"]
        """
    )
    assert [r.target for r in c.restores] == ["unknown"]
    assert [s.method for s in c.saves] == ["orbax.save"]  # super().save(args=...), not mine.save
    assert c.legacy == []


def test_opx504_probing_calls_are_silent():
    assert codes(
        """
        import pytest

        def check(params, grads):
            opt_state = tx.init(params)
            try:
                tx.update(grads, opt_state)
            except ValueError:
                pass
            with pytest.raises(ValueError):
                tx.update(grads, opt_state)

        def test_update_runs(params, grads):
            tx.update(grads, tx.init(params), params)
        """,
        ("OPX504",),
    ) == []


def test_same_target_uses_the_manager_directory():
    c = ckpt(
        """
        def finetune(config):
            mngr = ocp.CheckpointManager(config.pretrained_dir)
            return mngr.restore(mngr.latest_step())

        def train(config, state):
            mngr = ocp.CheckpointManager(config.workdir)
            for step in range(10):
                mngr.save(step, args=ocp.args.StandardSave(state))

        def resume(config):
            manager = ocp.CheckpointManager(config.workdir)
            return manager.restore(manager.latest_step())

        def save_helper(mngr, state, step):
            mngr.save(step, args=ocp.args.StandardSave(state))
        """
    )
    save, helper_save = c.saves
    finetune, resume = c.restores
    assert not c.same_target(save, finetune)  # same variable name, other directory
    assert c.same_target(save, resume)  # other variable name, same directory
    assert c.same_target(helper_save, finetune)  # manager passed in: matched by its variable


def test_opx502_other_branch_tells_exclusive_arms_apart():
    from optax_lint.syntax.nodes import other_branch

    fn = cst.parse_module(textwrap.dedent("""\
        def run():
            if a:
                x = 1
                y = 2
            elif b:
                z = 3
            else:
                w = 4
            v = 5
        """)).body[0]
    outer_if = fn.body.body[0]
    x, y = outer_if.body.body
    z = outer_if.orelse.body.body[0]
    w = outer_if.orelse.orelse.body.body[0]
    v = fn.body.body[1]
    assert other_branch(fn, x, z) and other_branch(fn, z, w) and other_branch(fn, x, w)
    assert not other_branch(fn, x, y)  # the same arm
    assert not other_branch(fn, x, v)  # after the if: runs either way


def test_opx502_reports_the_init_on_the_resume_arm_not_the_fresh_start_arm():
    src = """
        def run(model, x):
            mngr = ocp.CheckpointManager("/tmp/run")
            if mngr.latest_step() is not None:
                restored = mngr.restore(mngr.latest_step())
                params = restored["params"]
                opt_state = tx.init(params)
            else:
                params = model.init(x)
                opt_state = tx.init(params)
            for step in range(10):
                updates, opt_state = tx.update(params, opt_state)
                params = optax.apply_updates(params, updates)
                mngr.save(step, args=ocp.args.StandardSave({"params": params}))
            return params
        """
    assert codes(src, ("OPX502",)) == [(7, "OPX502")]
    # the Adam state restored under another item name counts as restored
    kept = src.replace(
        '                opt_state = tx.init(params)\n            else:',
        '                opt_state = restored["optimizer_state"]\n            else:',
    )
    assert kept != src
    assert codes(kept, ("OPX502",)) == []
    # under a key that names no optimizer state, the only init left is the fresh-start arm's
    other_key = kept.replace('restored["optimizer_state"]', 'restored["adam"]')
    assert other_key != kept
    assert codes(other_key, ("OPX502",)) == []


@pytest.mark.parametrize(
    "helper, parsed",
    [
        ("from flax.training.checkpoints import save_checkpoint\n\ndef save(d, step, tree):\n    save_checkpoint(d, tree, step)\n", True),
        ("import pickle\n\ndef save(d, step, tree):\n    with open(d, 'wb') as f:\n        pickle.dump(tree, f)\n", True),
        # names `save` and mentions a checkpoint, but hands nothing to a checkpoint library
        ("import json\n\ndef save(d, step, tree):\n    '''Write the metrics of a checkpoint step.'''\n    json.dump({'step': step}, open(d, 'w'))\n", False),
    ],
)
def test_a_project_helper_is_parsed_only_when_its_text_names_a_checkpoint_library(tmp_path, helper, parsed):
    from optax_lint.facts.project.files import ProjectFiles

    (tmp_path / "ckpt.py").write_text(helper)
    train = HEADER + "import ckpt\n\ndef train(params, batches):\n    for step, b in enumerate(batches):\n        ckpt.save('/tmp/c', step, params)\n"
    (tmp_path / "train.py").write_text(train)
    files = ProjectFiles()
    facts = ModuleFacts(cst.parse_module(train), str(tmp_path / "train.py"), root=str(tmp_path), text=train, project_files=files)
    facts.checkpoints  # classify the saves, reading project helpers on the way
    assert (files.parses == 1) is parsed
    assert (len(facts.checkpoints.saves) == 1) is parsed  # the helper's save is the caller's
