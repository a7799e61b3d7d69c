"""The extraction and reporting behaviour behind issue 10's patterns, one test each."""

from __future__ import annotations

import os
import textwrap

import libcst as cst

from optax_lint.core.diagnostics import Finding, Severity, Span
from optax_lint.engine import lint as engine
from optax_lint.facts.file_role import display_path
from optax_lint.facts.module import ModuleFacts


def lint(src: str, path: str, codes) -> list:
    return engine.lint_text(textwrap.dedent(src), path, set(codes)).findings


def facts(src: str, path: str = "x.py") -> ModuleFacts:
    return ModuleFacts(cst.parse_module(textwrap.dedent(src)), path)


TRANSFORMER_RUN = """
    {pragma}
    import flax.linen as nn
    import jax
    import optax
    from flax.training import train_state


    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            for _ in range(4):
                x = nn.MultiHeadDotProductAttention(num_heads=2)(x, x)
            return x


    def create(rng, x):
        model = Block()
        params = model.init(rng, x)
        return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adamw(1e-3))


    def train(rng, batches):
        state = create(rng, batches[0])
        for x in batches:
            grads = jax.grad(lambda p: state.apply_fn(p, x).sum())(state.params)
            state = state.apply_gradients(grads=grads)
        return state
"""


def test_protocol_rules_speak_only_about_training_runs_unless_context_is_declared() -> None:
    plain = TRANSFORMER_RUN.format(pragma="")
    assert [f.code for f in lint(plain, "train.py", {"OPX201"})] == ["OPX201"]
    assert lint(plain, "tests/train.py", {"OPX201"}) == []
    assert lint(plain, "model_test.py", {"OPX201"}) == []
    # The same optimizer, built but never stepped: no training run to advise.
    built_only = plain[: plain.index("    def train(")]
    assert lint(built_only, "train.py", {"OPX201"}) == []
    declared = TRANSFORMER_RUN.format(pragma="# optax-lint: context arch=transformer")
    assert [f.code for f in lint(declared, "tests/test_train.py", {"OPX201"})] == ["OPX201"]


def test_arch_comes_from_the_training_function_not_a_testcase_or_mock_name() -> None:
    src = """
        import flax.linen as nn
        import optax
        from flax.training import train_state


        class MLP(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.Dense(2)(x)


        class TransformerTest:
            def helper(self):
                return MockTransformer()


        class MockTransformer:
            pass


        def create(rng, x):
            model = MLP()
            return train_state.TrainState.create(apply_fn=model.apply, params=model.init(rng, x), tx=optax.adam(1e-3))
    """
    arch = facts(src, "train.py").run_context.get("arch")
    assert arch is not None and arch.value == "mlp"


def test_opx406_names_the_library_that_writes() -> None:
    src = """
        import pickle
        import jax
        import optax
        import orbax.checkpoint as ocp
        from flax import jax_utils
        from flax.training import train_state


        def train(model, params, manager: ocp.CheckpointManager, step_fn, batches):
            state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
            state = jax_utils.replicate(state)
            p_step = jax.pmap(step_fn, axis_name="batch")
            for i, batch in enumerate(batches):
                state = p_step(state, batch)
                manager.save(i, args=ocp.args.StandardSave(state))
            with open("state.pkl", "wb") as f:
                pickle.dump(state, f)
    """
    messages = [f.message for f in lint(src, "train.py", {"OPX406"})]
    assert len(messages) == 2
    orbax_msg = next(m for m in messages if "StandardSave" in m or "save(" in m and "dump" not in m)
    pickle_msg = next(m for m in messages if "dump(" in m)
    assert "orbax" in orbax_msg
    assert "orbax" not in pickle_msg and "one copy per device" in pickle_msg


def test_opx702_quotes_the_import_exactly() -> None:
    src = "from optax._src.alias import adamw as my_adamw, sgd\n\ntx = my_adamw(1e-3)\n"
    (finding,) = lint(src, "train.py", {"OPX702"})
    assert "`from optax._src.alias import adamw as my_adamw, sgd`" in finding.message


def test_one_finding_per_code_line_and_message() -> None:
    span = Span(3, 1, 3, 10)
    twin = [Finding("OPX101", "clip-after-optimizer", Severity.ERROR, "m", "x.py", span) for _ in range(2)]
    other = Finding("OPX101", "clip-after-optimizer", Severity.ERROR, "another", "x.py", span)
    assert len(engine._distinct(twin + [other])) == 2


def test_messages_never_quote_machine_specific_paths(tmp_path) -> None:
    inside = str(tmp_path / "pkg" / "configs" / "default.py")
    assert display_path(inside, str(tmp_path)) == os.path.join("pkg", "configs", "default.py")
    assert display_path("/elsewhere/on/this/machine/train.py", str(tmp_path)) == "train.py"
    assert display_path("train.py", str(tmp_path)) == "train.py"


def test_code_written_to_fail_is_not_reported() -> None:
    src = """
        import unittest
        import optax


        class T(unittest.TestCase):
            def test_bad_schedule(self):
                with self.assertRaises(ValueError):
                    optax.warmup_cosine_decay_schedule(0.0, 1.0, 10, 0)
                tx = optax.sgd(optax.warmup_cosine_decay_schedule(0.0, 1.0, 10, 5))
                updates, _ = tx.update({"w": 1.0}, tx.init({"w": 0.0}))
    """
    assert [f.span.line for f in lint(src, "check.py", {"OPX305"})] == [10]


def test_the_wrong_object_built_before_the_raising_call_is_not_reported() -> None:
    src = """
        import unittest
        import optax


        class T(unittest.TestCase):
            def test_unknown_label(self):
                tx = optax.multi_transform({"a": optax.sgd(1.0)}, {"w": "a", "b": "adm"})
                with self.assertRaises(ValueError):
                    tx.init({"w": 1.0, "b": 2.0})
                tx = optax.multi_transform({"a": optax.sgd(1.0)}, {"w": "a", "b": "adm"})
                updates, _ = tx.update({"w": 1.0, "b": 1.0}, tx.init({"w": 1.0, "b": 2.0}))

            def helper_unknown_label(self):
                tx = optax.multi_transform({"a": optax.sgd(1.0)}, {"w": "a", "b": "adm"})
                with self.assertRaises(ValueError):
                    tx.init({"w": 1.0, "b": 2.0})
    """
    # Before the block in a test: silent. After it, or in a function that is not a test: reported.
    assert [f.span.line for f in lint(src, "check.py", {"OPX111"})] == [11, 15]


def test_used_as_optimizer_follows_branches_defaults_and_callers() -> None:
    f = facts(
        """
        import optax

        def make(kind, direction=optax.scale_by_adam()):
            if kind:
                tx = optax.chain(direction, optax.scale(-1e-3))
            else:
                tx = optax.sgd(0.1)
            return tx

        def block():
            return optax.scale_by_rms()

        def run(params, grads, opt=None):
            opt = opt if opt is not None else make(True)
            state = opt.init(params)
            updates, state = opt.update(grads, state, params)
            return optax.apply_updates(params, updates)
        """
    )
    used = f.used_as_optimizer
    names = {f.builder.build(p.call, p.record.scope).key: id(p.call) in used for p in f.pipelines}
    assert names["chain"] is True and names["sgd"] is True
    assert names["scale_by_rms"] is False


def test_schedules_and_pipelines_read_lists_the_same_way() -> None:
    f = facts(
        """
        import optax
        pieces = [optax.constant_schedule(1.0)]
        bounds = []
        pieces.append(optax.constant_schedule(0.5))
        bounds += [100]
        schedule = optax.join_schedules(pieces, bounds)
        """
    )
    (join,) = [s for s in f.schedules if s.key == "join_schedules"]
    piece_exprs, bound_exprs = f.schedule_analysis.shapes.join_parts(join)
    assert len(piece_exprs) == 2 and len(bound_exprs) == 1
    assert len(join.pieces) == 2


def test_self_referencing_lists_and_names_stay_bounded() -> None:
    src = """
        import optax
        a = [*a]
        x = [optax.adam(1e-3)]
        x += x
        tx = optax.chain(*x, *a)
        s = optax.join_schedules([*s], x)
        def f(t=optax.chain(t)):
            return optax.chain(t, t if t else t)
        u = optax.adam(1) if True else u
        tx.init(1)
        updates, state = tx.update(1, 2)
        optax.apply_updates(1, updates)
    """
    run = engine.lint_text(textwrap.dedent(src), "train.py", {"OPX101", "OPX104", "OPX306"})
    assert run.internal_errors == 0


def test_opx301_is_silent_on_a_run_in_the_protocols_constant_rate_row() -> None:
    """A from-scratch run under 10K steps is in the protocol's constant-rate row (warmup
    belongs to the longer rows); a fine-tune warms up briefly (about 100 steps) whatever
    its length, unless that is the whole run."""
    src = "{pragma}\nimport optax\ntx = optax.adam(3e-4)\n"

    def codes(context: str) -> list:
        return [f.code for f in lint(src.format(pragma=f"# optax-lint: context {context}"), "train.py", {"OPX301"})]

    assert codes("arch=transformer steps=2000") == []
    assert codes("arch=transformer steps=9999") == []
    assert codes("arch=transformer steps=10000") == ["OPX301"]
    assert codes("arch=transformer steps=100 fine_tune=true") == []
    assert codes("arch=transformer steps=101 fine_tune=true") == ["OPX301"]
    assert codes("arch=transformer steps=5000 fine_tune=true") == ["OPX301"]
    assert codes("arch=transformer") == ["OPX301"]  # the run's length is unknown


def test_opx301_length_premise_skips_a_numpyro_svi_fit() -> None:
    """Run length alone says nothing about a variational fit through numpyro's SVI (the
    optimizer given as `optim`, directly or through optax_to_numpyro); the same decay
    driving a plain optax loop of that length is still reported."""
    head = "# optax-lint: context steps=50000\nimport optax\nfrom numpyro.infer import SVI\nfrom numpyro.optim import optax_to_numpyro\n"
    decay = "tx = optax.adam(optax.exponential_decay(0.01, 50000, 0.01))\n"

    def codes(body: str) -> list:
        return [f.code for f in lint(head + decay + body, "fit.py", {"OPX301"})]

    assert codes("svi = SVI(model, guide, tx, loss)\n") == []
    assert codes("svi = SVI(model, guide, optim=optax_to_numpyro(tx), loss=loss)\n") == []
    assert codes("opt_state = tx.init(params)\n") == ["OPX301"]


def test_opx201_names_the_harm_for_the_optimizer_it_found() -> None:
    """An unclipped spike stalls Adam through its second moment; plain SGD has no such
    memory, its step is the gradient itself: the message says the harm that applies."""
    src = "# optax-lint: context arch=transformer\nimport optax\ntx = optax.{opt}\nupdates, state = tx.update(grads, state, params)\n"

    def message(opt: str) -> str:
        (finding,) = lint(src.format(opt=opt), "train.py", {"OPX201"})
        return finding.message

    assert message("adamw(3e-4)").endswith("so one corrupted batch cannot stall Adam")
    assert message("sgd(0.1, momentum=0.9)").endswith("so one corrupted batch cannot take a step as large as its gradient")
    assert message("lamb(1e-3)").endswith("so one corrupted batch cannot stall Adam")
    assert message("rmsprop(1e-3)").endswith("cannot stall rmsprop (its second moment keeps the spike)")


def test_opx108_judges_the_whole_runs_decay() -> None:
    """Decoupled decay shrinks a weight by at most 1 - exp(-lr x wd x steps) over the run:
    under 5% (5,000 steps at 3e-4, wd 1e-2: 1.5%) no mask is asked for; over a longer run
    (50,000 steps: 14%), or with the length unknown, the finding stands."""
    src = "# optax-lint: context arch=transformer{steps}\nimport optax\ntx = optax.adamw(3e-4, weight_decay=1e-2)\n"

    def codes(steps: str) -> list:
        return [f.code for f in lint(src.format(steps=steps), "train.py", {"OPX108"})]

    assert codes(" steps=5000") == []
    assert codes(" steps=50000") == ["OPX108"]
    assert codes("") == ["OPX108"]


def test_opx501_best_epoch_save_is_the_selected_model_unless_a_run_resumes() -> None:
    """A params-only checkpoint written when a metric beats the best so far keeps the
    selected model; a periodic one, or any save in a file that resumes training from a
    checkpoint, is still a resume point without the optimizer state."""
    head = (
        "import optax\nfrom flax.training import checkpoints, train_state\n"
        "tx = optax.adam(1e-3)\nstate = train_state.TrainState.create(apply_fn=f, params=p, tx=tx)\n"
        "def save(state, step):\n    checkpoints.save_checkpoint('ckpt', state.params, step)\n"
    )
    best = "best = 0.0\nfor epoch in range(100):\n    state = step(state)\n    acc = evaluate(state)\n    if acc > best:\n        best = acc\n        save(state, epoch)\n"
    periodic = "for epoch in range(100):\n    state = step(state)\n    if epoch % 10 == 0:\n        save(state, epoch)\n"
    resumed = "params = checkpoints.restore_checkpoint('ckpt', None)\nstate = state.replace(params=params)\n"

    def codes(body: str) -> list:
        return [f.code for f in lint(head + body, "train.py", {"OPX501"})]

    assert codes(best) == []
    assert codes(periodic) == ["OPX501"]
    assert codes(resumed + best) == ["OPX501"]


def test_opx103_counts_decays_per_parameter_group() -> None:
    """multi_transform sends each parameter through one branch: a decay in one group and
    adamw's in another decay each parameter once; both in one branch decay it twice."""
    head = "import optax\n"
    split = ("tx = optax.multi_transform({'m': optax.chain(optax.trace(0.9), optax.add_decayed_weights(0.1), optax.scale(-0.02)),"
             " 'o': optax.adamw(1e-3, weight_decay=0.1)}, labels)\n")
    both = ("tx = optax.multi_transform({'a': optax.adamw(1e-3, weight_decay=0.1),"
            " 'b': optax.chain(optax.add_decayed_weights(0.1), optax.adamw(1e-3, weight_decay=0.1))}, labels)\n")
    assert [f.code for f in lint(head + split, "train.py", {"OPX103"})] == []
    assert [(f.code, f.span.line) for f in lint(head + both, "train.py", {"OPX103"})] == [("OPX103", 2)]
