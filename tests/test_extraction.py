"""Unit tests of the extraction layer (optax_lint/extract/).

Each test feeds a small source snippet to `ModuleFacts` and asserts exactly what the
layer extracts: canonical names, pipeline trees and their primitive sequences,
argument binding, static values and signs, schedules, update sites and consumers,
and the walker's raw records. The layer never imports optax: everything it knows
about optax comes from rules/optax_api.toml.
"""

from __future__ import annotations

import sys
import textwrap
import time
from typing import Optional

import libcst as cst
import pytest

from optax_lint.facts.module import ModuleFacts
from optax_lint.facts.pipelines.build import Pipeline, Step, TxNode
from optax_lint.syntax.values import Unknown, sign_of, value_of
from optax_lint.syntax.walker import Scope, collect, walk

# ---------------------------------------------------------------------------
# Helpers


def facts(src: str) -> ModuleFacts:
    return ModuleFacts(cst.parse_module(textwrap.dedent(src)), "x.py")


def code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def callees(f: ModuleFacts) -> dict[str, Optional[str]]:
    """Source of each call's callee -> its canonical name (callees must be unique)."""
    out: dict[str, Optional[str]] = {}
    for record in f.raw.calls:
        text = code(record.node.func)
        assert text not in out, f"callee {text!r} appears twice; use a different helper"
        out[text] = f.callee(record)
    return out


def scope_named(f: ModuleFacts, name: str) -> Scope:
    matches = [s for s in f.raw.scopes if s.name == name]
    assert len(matches) == 1, [s.name for s in f.raw.scopes]
    return matches[0]


def only_pipeline(f: ModuleFacts) -> Pipeline:
    assert len(f.pipelines) == 1, [(p.name, p.root.key) for p in f.pipelines]
    return f.pipelines[0]


def pipeline_named(f: ModuleFacts, name: str) -> Pipeline:
    matches = [p for p in f.pipelines if p.name == name]
    assert len(matches) == 1, [(p.name, p.root.key) for p in f.pipelines]
    return matches[0]


def only_pipeline_in(f: ModuleFacts, function: str) -> Pipeline:
    matches = [p for p in f.pipelines if p.function is not None and p.function.name == function]
    assert len(matches) == 1
    return matches[0]


def prims(pipeline: Pipeline) -> list[list[str]]:
    return [[step.primitive for step in seq] for seq in pipeline.sequences()]


def only_sequence(pipeline: Pipeline) -> list[Step]:
    sequences = pipeline.sequences()
    assert len(sequences) == 1, prims(pipeline)
    return sequences[0]


def step(sequence: list[Step], primitive: str) -> Step:
    matches = [s for s in sequence if s.primitive == primitive]
    assert len(matches) == 1, [s.primitive for s in sequence]
    return matches[0]


def tree(node: TxNode) -> tuple:
    """A TxNode tree as nested (key, [children]) tuples, leaves as bare keys."""
    if not node.children:
        return node.key
    return (node.key, [tree(child) for child in node.children])


def value(src: str, expr: str, scope: str = "<module>"):
    f = facts(src)
    return value_of(cst.parse_expression(expr), scope_named(f, scope))


def sign(src: str, expr: str, scope: str = "<module>") -> Optional[int]:
    f = facts(src)
    return sign_of(cst.parse_expression(expr), scope_named(f, scope))


# ---------------------------------------------------------------------------
# Qualified names


def test_import_optax_and_alias_resolve_to_canonical_names() -> None:
    f = facts(
        """
        import optax
        import optax as ox
        a = optax.adam(1e-3)
        b = ox.sgd(0.1)
        c = ox.tree_utils.tree_l2_norm(g)
        """
    )
    assert callees(f) == {
        "optax.adam": "optax.adam",
        "ox.sgd": "optax.sgd",
        # Not in the transform table but still an optax name: kept as written.
        "ox.tree_utils.tree_l2_norm": "optax.tree_utils.tree_l2_norm",
    }


def test_from_imports_resolve() -> None:
    f = facts(
        """
        from optax import adamw, chain
        from optax import schedules
        from optax import contrib as c
        tx = chain(adamw(1e-3))
        lr = schedules.warmup_cosine_decay_schedule(0.0, 1e-3, 100, 1000)
        m = c.muon(1e-3)
        """
    )
    assert callees(f) == {
        "chain": "optax.chain",
        "adamw": "optax.adamw",
        "schedules.warmup_cosine_decay_schedule": "optax.warmup_cosine_decay_schedule",
        "c.muon": "optax.contrib.muon",
    }


def test_submodule_homes_are_canonicalised() -> None:
    f = facts(
        """
        import optax
        import optax.schedules as sch
        a = optax.transforms.clip_by_global_norm(1.0)
        b = optax.schedules.cosine_decay_schedule(1e-3, 100)
        c = sch.linear_schedule(0.0, 1e-3, 10)
        d = optax.contrib.muon(1e-3)
        e = optax.partition({}, labels)
        """
    )
    assert callees(f) == {
        "optax.transforms.clip_by_global_norm": "optax.clip_by_global_norm",
        "optax.schedules.cosine_decay_schedule": "optax.cosine_decay_schedule",
        "sch.linear_schedule": "optax.linear_schedule",
        "optax.contrib.muon": "optax.contrib.muon",
        # `partition` is another name of the same object: the table's aliases section.
        "optax.partition": "optax.multi_transform",
    }


def test_private_paths_map_to_public_objects() -> None:
    f = facts(
        """
        from optax._src.alias import adamw
        from optax._src import transform
        from optax.contrib._muon import muon
        a = adamw(1e-3)
        b = transform.scale_by_adam()
        c = muon(1e-3)
        """
    )
    assert callees(f) == {
        "adamw": "optax.adamw",
        "transform.scale_by_adam": "optax.scale_by_adam",
        "muon": "optax.contrib.muon",
    }


def test_private_import_builds_a_real_pipeline() -> None:
    f = facts(
        """
        from optax._src.alias import adamw
        tx = adamw(1e-3)
        """
    )
    assert prims(only_pipeline(f)) == [["scale_by_adam", "add_decayed_weights", "scale_by_learning_rate"]]


def test_local_module_named_optax_is_not_optax() -> None:
    f = facts(
        """
        from big_vision import optax as bv_optax
        a = bv_optax.adamw(1e-3)
        """
    )
    assert callees(f) == {"bv_optax.adamw": "big_vision.optax.adamw"}
    assert f.pipelines == []

    f = facts(
        """
        from mypkg import optax
        tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))
        """
    )
    assert callees(f) == {
        "optax.chain": "mypkg.optax.chain",
        "optax.clip_by_global_norm": "mypkg.optax.clip_by_global_norm",
        "optax.adamw": "mypkg.optax.adamw",
    }
    assert f.pipelines == []


def test_relative_import_of_optax_is_not_optax() -> None:
    f = facts(
        """
        from . import optax
        from .optax import adamw
        a = optax.adam(1e-3)
        b = adamw(1e-3)
        """
    )
    assert callees(f) == {"optax.adam": ".optax.adam", "adamw": ".optax.adamw"}
    assert f.pipelines == []


def test_import_reassigned_in_same_scope_resolves_to_nothing() -> None:
    f = facts(
        """
        import optax
        from optax import adamw
        optax = make_fake()
        def adamw(lr):
            return lr
        a = optax.sgd(0.1)
        b = adamw(1e-3)
        """
    )
    names = callees(f)
    assert names["optax.sgd"] is None
    assert names["adamw"] is None
    assert f.pipelines == []


def test_local_shadowing_in_function_and_parameter() -> None:
    f = facts(
        """
        import optax
        def by_param(optax):
            return optax.adam(1e-3)
        def by_local():
            optax = other
            return optax.sgd(0.1)
        def untouched():
            return optax.lion(1e-4)
        """
    )
    assert callees(f) == {
        "optax.adam": None,
        "optax.sgd": None,
        "optax.lion": "optax.lion",
    }


def test_imports_inside_functions_are_local_to_them() -> None:
    f = facts(
        """
        def make():
            import optax as o
            from optax import sgd
            return o.chain(o.clip(1.0), sgd(0.1))
        outside = o.adam(1e-3)
        """
    )
    by_scope = {(code(r.node.func), r.scope.name): f.callee(r) for r in f.raw.calls}
    assert by_scope == {
        ("o.chain", "make"): "optax.chain",
        ("o.clip", "make"): "optax.clip",
        ("sgd", "make"): "optax.sgd",
        ("o.adam", "<module>"): None,
    }
    assert prims(only_pipeline(f)) == [["clip", "identity", "scale_by_learning_rate"]]


def test_class_body_imports_are_not_visible_in_methods() -> None:
    f = facts(
        """
        class Trainer:
            import optax as o
            tx = o.adam(1e-3)
            def make(self):
                return o.sgd(0.1)
        """
    )
    assert callees(f) == {"o.adam": "optax.adam", "o.sgd": None}


def test_canonical_on_expressions() -> None:
    f = facts(
        """
        import optax as ox
        def fn():
            from optax import transforms
        """
    )
    module, fn = f.raw.module_scope, scope_named(f, "fn")
    # Keep the parsed expressions alive: the resolver caches by object id.
    exprs = [cst.parse_expression(e) for e in ("ox.adamw", "ox.transforms.masked", "transforms.masked", "jax.grad")]
    assert f.canonical(exprs[0], module) == "optax.adamw"
    assert f.canonical(exprs[1], module) == "optax.masked"
    assert f.canonical(exprs[2], module) is None
    assert f.canonical(exprs[2], fn) == "optax.masked"
    assert f.canonical(exprs[3], module) is None  # jax is not imported here


# ---------------------------------------------------------------------------
# Pipelines: structure and expansion


def test_nested_chains_are_flattened() -> None:
    f = facts(
        """
        import optax
        tx = optax.chain(optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3)))
        """
    )
    pipeline = only_pipeline(f)
    assert pipeline.name == "tx"
    assert pipeline.function is None
    assert tree(pipeline.root) == ("chain", [("chain", ["clip_by_global_norm", "adam"])])
    assert prims(pipeline) == [["clip_by_global_norm", "scale_by_adam", "scale_by_learning_rate"]]


def test_transforms_bound_to_names_and_chained_later() -> None:
    f = facts(
        """
        import optax as ox
        clip = ox.clip_by_global_norm(1.0)
        opt = ox.adamw(1e-3)
        tx = ox.chain(clip, opt)
        """
    )
    pipeline = only_pipeline(f)  # clip and opt are components, not pipelines
    assert pipeline.name == "tx"
    assert prims(pipeline) == [["clip_by_global_norm", "scale_by_adam", "add_decayed_weights", "scale_by_learning_rate"]]
    clip_node, opt_node = pipeline.root.children
    assert [code(n) for n in clip_node.via] == ["clip"]
    assert [code(n) for n in opt_node.via] == ["opt"]
    # The element as written in the chain (for fixes that move it).
    assert code(clip_node.slot.value) == "clip"
    assert clip_node.slot_owner is pipeline.call


def test_one_pipeline_per_outermost_constructor() -> None:
    f = facts(
        """
        import optax
        clip = optax.clip_by_global_norm(1.0)
        tx1 = optax.chain(clip, optax.adam(1e-3))
        tx2 = optax.chain(clip, optax.sgd(0.1))
        base = optax.chain(optax.scale_by_adam(), optax.scale(-1e-3))
        tx3 = optax.MultiSteps(base, every_k_schedule=2)
        unused = optax.lion(1e-4)
        """
    )
    assert sorted((p.name, p.root.key) for p in f.pipelines) == [
        ("tx1", "chain"),
        ("tx2", "chain"),
        ("tx3", "MultiSteps"),
        ("unused", "lion"),
    ]


def test_chain_built_in_helper_function() -> None:
    f = facts(
        """
        import optax
        def make_opt():
            return optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
        tx = make_opt()
        def step(grads, opt_state, params):
            return tx.update(grads, opt_state, params)
        """
    )
    pipeline = only_pipeline(f)
    assert pipeline.function is scope_named(f, "make_opt")
    assert pipeline.name is None
    assert prims(pipeline) == [["clip_by_global_norm", "scale_by_adam", "scale_by_learning_rate"]]
    # `tx = make_opt()` is followed into the helper.
    (site,) = f.update_sites
    assert site.pipeline is pipeline


def test_helper_returning_a_name() -> None:
    f = facts(
        """
        import optax
        def make_opt():
            tx = optax.chain(optax.clip(1.0), optax.sgd(0.1, momentum=0.9))
            return tx
        """
    )
    pipeline = only_pipeline(f)
    assert pipeline.name == "tx"
    assert pipeline.function is scope_named(f, "make_opt")
    assert prims(pipeline) == [["clip", "trace", "scale_by_learning_rate"]]


def test_helper_with_two_returns_is_unknown() -> None:
    f = facts(
        """
        import optax
        def make_opt(big):
            if big:
                return optax.adam(1e-3)
            return optax.sgd(0.1)
        tx = optax.chain(optax.clip(1.0), make_opt(True))
        """
    )
    pipeline = pipeline_named(f, "tx")
    unknown = pipeline.root.children[1]
    assert unknown.kind == "unknown"
    assert unknown.reason == "make_opt() returns 2 values"
    # The two optimizers in the helper stay pipelines of their own.
    assert sorted(p.root.key for p in f.pipelines) == ["adam", "chain", "sgd"]


def test_chain_star_list_with_append_and_insert() -> None:
    f = facts(
        """
        import optax
        def build(cfg):
            transforms = [optax.scale_by_adam()]
            if cfg.clip:
                transforms.append(optax.clip_by_global_norm(1.0))
            transforms.insert(0, optax.add_decayed_weights(1e-4))
            transforms.append(optax.scale_by_learning_rate(1e-3))
            return optax.chain(*transforms)
        """
    )
    pipeline = only_pipeline(f)
    assert pipeline.function is scope_named(f, "build")
    (sequence,) = pipeline.sequences()
    assert [(s.primitive, s.maybe) for s in sequence] == [
        ("add_decayed_weights", False),
        ("scale_by_adam", False),
        ("clip_by_global_norm", True),  # appended under `if`
        ("scale_by_learning_rate", False),
    ]
    assert [c.conditional for c in pipeline.root.children] == [False, False, True, False]
    # Elements that came through .append() have no slot in the chain call.
    assert all(c.slot is None for c in pipeline.root.children)


def test_chain_star_list_appended_in_a_loop_is_conditional() -> None:
    f = facts(
        """
        import optax
        transforms = []
        for k in range(2):
            transforms.append(optax.scale(0.5))
        tx = optax.chain(*transforms, optax.sgd(0.1))
        """
    )
    (sequence,) = pipeline_named(f, "tx").sequences()
    assert [(s.primitive, s.maybe) for s in sequence] == [
        ("scale", True),
        ("identity", False),
        ("scale_by_learning_rate", False),
    ]


def test_chain_star_list_insert_at_unknown_index() -> None:
    f = facts(
        """
        import optax
        transforms = [optax.scale_by_adam(), optax.scale(-1e-3)]
        transforms.insert(1, optax.clip(1.0))
        tx = optax.chain(*transforms)
        """
    )
    nodes = pipeline_named(f, "tx").root.children
    assert [n.key for n in nodes] == ["scale_by_adam", "scale", "<unknown>"]
    assert nodes[2].reason == "insert at an unknown index"


def test_chain_star_list_grown_by_concatenation() -> None:
    f = facts(
        """
        import optax
        transforms = [optax.adam(1e-3)]
        transforms = transforms + [optax.clip(1.0)]
        transforms += [optax.scale(0.5)]
        tx = optax.chain(*transforms)
        """
    )
    assert [n.key for n in pipeline_named(f, "tx").root.children] == ["adam", "clip", "scale"]


def test_chain_star_list_reassigned_is_unknown() -> None:
    f = facts(
        """
        import optax
        transforms = [optax.adam(1e-3)]
        transforms = make_more()
        tx = optax.chain(*transforms)
        """
    )
    nodes = pipeline_named(f, "tx").root.children
    assert nodes[-1].kind == "unknown"
    assert "reassigned" in nodes[-1].reason


def test_append_after_chain_call_is_not_part_of_it() -> None:
    f = facts(
        """
        import optax
        transforms = [optax.clip_by_global_norm(1.0), optax.adam(1e-3)]
        tx = optax.chain(*transforms)
        transforms.append(optax.add_decayed_weights(1e-4))
        tx_wd = optax.chain(*transforms)
        """
    )
    assert prims(pipeline_named(f, "tx")) == [["clip_by_global_norm", "scale_by_adam", "scale_by_learning_rate"]]


def test_inject_hyperparams_inside_chain() -> None:
    f = facts(
        """
        import optax
        tx = optax.chain(
            optax.clip_by_global_norm(1.0),
            optax.inject_hyperparams(optax.adamw)(learning_rate=1e-3, weight_decay=0.1),
        )
        """
    )
    pipeline = only_pipeline(f)
    assert tree(pipeline.root) == ("chain", ["clip_by_global_norm", ("inject_hyperparams", ["adamw"])])
    inject = pipeline.root.children[1]
    assert inject.kind == "wrapper"
    (inner,) = inject.children
    assert inner.kind == "alias"
    # The alias's arguments are the outer call's: inject_hyperparams(f)(**these).
    assert code(inner.call.func) == "optax.inject_hyperparams(optax.adamw)"
    assert inner.args.value("learning_rate") == 1e-3
    assert inner.args.value("weight_decay") == 0.1
    assert inner.args.value("b1") == 0.9
    sequence = only_sequence(pipeline)
    assert [s.primitive for s in sequence] == [
        "clip_by_global_norm", "scale_by_adam", "add_decayed_weights", "scale_by_learning_rate",
    ]
    assert step(sequence, "add_decayed_weights").arg_value("weight_decay") == 0.1
    assert step(sequence, "scale_by_learning_rate").arg_value("learning_rate") == 1e-3


def test_inject_hyperparams_of_unknown_optimizer() -> None:
    f = facts(
        """
        import optax
        tx = optax.chain(optax.clip(1.0), optax.inject_hyperparams(make_opt)(learning_rate=1e-3))
        """
    )
    inject = only_pipeline(f).root.children[1]
    (inner,) = inject.children
    assert inner.kind == "unknown"
    assert inner.reason == "inject_hyperparams of an unknown optimizer"


def test_inject_hyperparams_at_top_level_is_a_pipeline() -> None:
    f = facts(
        """
        import optax
        tx = optax.inject_hyperparams(optax.adamw)(learning_rate=1e-3, weight_decay=0.1)
        """
    )
    pipeline = only_pipeline(f)
    assert pipeline.name == "tx"
    assert tree(pipeline.root) == ("inject_hyperparams", ["adamw"])
    assert prims(pipeline) == [["scale_by_adam", "add_decayed_weights", "scale_by_learning_rate"]]


def test_update_linked_to_top_level_inject_hyperparams() -> None:
    f = facts(
        """
        import optax
        tx = optax.inject_hyperparams(optax.sgd)(learning_rate=0.1, momentum=0.9)
        def step(grads, opt_state, params):
            return tx.update(grads, opt_state, params)
        """
    )
    (site,) = f.update_sites
    assert site.pipeline is not None
    assert site.pipeline.name == "tx"


def test_multisteps_and_gradient_transformation() -> None:
    f = facts(
        """
        import optax
        inner = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
        tx = optax.MultiSteps(inner, every_k_schedule=4)
        gt = tx.gradient_transformation()
        """
    )
    pipeline = only_pipeline(f)
    assert pipeline.name == "tx"
    assert tree(pipeline.root) == ("MultiSteps", [("chain", ["clip_by_global_norm", "adam"])])
    assert pipeline.root.args.value("every_k_schedule") == 4
    assert pipeline.root.args.value("use_grad_mean") is True  # table default
    assert prims(pipeline) == [["clip_by_global_norm", "scale_by_adam", "scale_by_learning_rate"]]


def test_multisteps_gradient_transformation_inline() -> None:
    f = facts(
        """
        import optax
        tx = optax.MultiSteps(opt=optax.sgd(0.1), every_k_schedule=2).gradient_transformation()
        """
    )
    pipeline = only_pipeline(f)
    assert pipeline.root.key == "MultiSteps"
    assert prims(pipeline) == [["identity", "scale_by_learning_rate"]]


def test_masked_steps_are_marked() -> None:
    f = facts(
        """
        import optax
        tx = optax.chain(
            optax.clip_by_global_norm(1.0),
            optax.masked(optax.add_decayed_weights(1e-4), decay_mask),
            optax.masked(optax.adam(1e-3), mask=adam_mask),
        )
        """
    )
    pipeline = only_pipeline(f)
    sequence = only_sequence(pipeline)
    assert [(s.primitive, s.masked) for s in sequence] == [
        ("clip_by_global_norm", False),
        ("add_decayed_weights", True),
        ("scale_by_adam", True),
        ("scale_by_learning_rate", True),
    ]
    masked = pipeline.root.children[1]
    (decay,) = masked.children
    assert decay.parent is masked
    assert decay.slot is None
    assert decay.chain_element() is masked  # the masked(...) is what the chain holds


def test_multi_transform_gives_one_sequence_per_label() -> None:
    f = facts(
        """
        import optax
        labels = {"w": "adam", "b": "sgd"}
        tx = optax.multi_transform(
            {
                "adam": optax.adam(1e-3),
                "sgd": optax.chain(optax.clip(1.0), optax.sgd(1e-2)),
                "frozen": optax.set_to_zero(),
            },
            labels,
        )
        """
    )
    pipeline = only_pipeline(f)
    assert pipeline.root.labels == ["adam", "sgd", "frozen"]
    assert prims(pipeline) == [
        ["scale_by_adam", "scale_by_learning_rate"],
        ["clip", "identity", "scale_by_learning_rate"],
        ["set_to_zero"],
    ]


def test_multi_transform_dict_from_a_name_and_partition_alias() -> None:
    f = facts(
        """
        import optax
        transforms = {"a": optax.adam(1e-3), "b": optax.sgd(0.1)}
        tx = optax.partition(transforms, param_labels=label_fn)
        """
    )
    pipeline = only_pipeline(f)
    assert pipeline.root.key == "multi_transform"
    assert pipeline.root.labels == ["a", "b"]
    assert prims(pipeline) == [["scale_by_adam", "scale_by_learning_rate"], ["identity", "scale_by_learning_rate"]]


def test_multi_transform_with_unknown_transforms() -> None:
    f = facts(
        """
        import optax
        tx = optax.multi_transform(make_transforms(), labels)
        """
    )
    (child,) = only_pipeline(f).root.children
    assert child.kind == "unknown"
    assert child.reason == "transforms not a dict literal"


def test_apply_if_finite_wraps_its_inner_chain() -> None:
    f = facts(
        """
        import optax
        tx = optax.apply_if_finite(optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3)), max_consecutive_errors=5)
        """
    )
    pipeline = only_pipeline(f)
    assert tree(pipeline.root) == ("apply_if_finite", [("chain", ["clip_by_global_norm", "adam"])])
    assert pipeline.root.args.value("max_consecutive_errors") == 5
    assert [(s.primitive, s.masked) for s in only_sequence(pipeline)] == [
        ("clip_by_global_norm", False),
        ("scale_by_adam", False),
        ("scale_by_learning_rate", False),
    ]


def test_named_chain() -> None:
    f = facts(
        """
        import optax
        tx = optax.named_chain(("clip", optax.clip_by_global_norm(1.0)), ("adam", optax.adam(1e-3)))
        """
    )
    pipeline = only_pipeline(f)
    assert pipeline.root.labels == ["clip", "adam"]
    assert tree(pipeline.root) == ("named_chain", ["clip_by_global_norm", "adam"])
    assert prims(pipeline) == [["clip_by_global_norm", "scale_by_adam", "scale_by_learning_rate"]]


def test_unknown_nodes_carry_reasons() -> None:
    f = facts(
        """
        import optax
        def with_user_transform(fn):
            return optax.chain(optax.clip_by_global_norm(1.0), fn)
        tx = optax.chain(
            my_transform(),
            getattr(optax, config.optimizer)(config.lr),
            optax.adam(1e-3),
        )
        """
    )
    helper = only_pipeline_in(f, "with_user_transform")
    unknown = helper.root.children[1]
    assert (unknown.key, unknown.kind) == ("<unknown>", "unknown")
    assert unknown.reason == "'fn' is a param, not a plain assignment"
    assert prims(helper) == [["clip_by_global_norm", "<unknown>"]]

    tx = pipeline_named(f, "tx")
    reasons = [n.reason for n in tx.root.children]
    assert reasons == ["call to my_transform", "call to getattr(optax, config.optimizer)", ""]
    (sequence,) = tx.sequences()
    assert [s.primitive for s in sequence] == ["<unknown>", "<unknown>", "scale_by_adam", "scale_by_learning_rate"]
    assert sequence[0].negates() is None


def test_local_helper_element_is_followed() -> None:
    f = facts(
        """
        import optax
        def descend():
            return optax.scale(-1e-3)
        tx = optax.chain(optax.scale_by_adam(), descend())
        """
    )
    pipeline = only_pipeline(f)  # the scale(...) in descend() is a component of tx
    assert pipeline.name == "tx"
    assert prims(pipeline) == [["scale_by_adam", "scale"]]
    assert only_sequence(pipeline)[1].negates() is True


# -- alias expansion --------------------------------------------------------


def test_sgd_expansion_depends_on_momentum() -> None:
    f = facts(
        """
        import optax
        plain = optax.sgd(0.1)
        explicit_none = optax.sgd(0.1, None)
        momentum = optax.sgd(0.1, momentum=0.9, nesterov=True)
        unknown = optax.sgd(0.1, momentum=cfg.momentum)
        """
    )
    assert prims(pipeline_named(f, "plain")) == [["identity", "scale_by_learning_rate"]]
    assert prims(pipeline_named(f, "explicit_none")) == [["identity", "scale_by_learning_rate"]]

    sequence = only_sequence(pipeline_named(f, "momentum"))
    assert [s.primitive for s in sequence] == ["trace", "scale_by_learning_rate"]
    trace = sequence[0]
    assert trace.arg_value("decay") == 0.9  # sgd's momentum is trace's decay
    assert trace.arg_value("nesterov") is True
    assert trace.arg_value("accumulator_dtype") is None

    # An unknown momentum: both branches are kept, each marked maybe.
    sequence = only_sequence(pipeline_named(f, "unknown"))
    assert [(s.primitive, s.maybe) for s in sequence] == [
        ("trace", True),
        ("identity", True),
        ("scale_by_learning_rate", False),
    ]


def test_adamw_passes_weight_decay_to_add_decayed_weights() -> None:
    f = facts(
        """
        import optax
        given = optax.adamw(1e-3, weight_decay=0.05, mask=decay_mask)
        default = optax.adamw(learning_rate=3e-4)
        """
    )
    sequence = only_sequence(pipeline_named(f, "given"))
    decay = step(sequence, "add_decayed_weights")
    assert decay.passed == {"weight_decay": "weight_decay", "mask": "mask"}
    assert decay.arg_value("weight_decay") == 0.05
    assert isinstance(decay.arg_value("mask"), Unknown)
    assert step(sequence, "scale_by_learning_rate").arg_value("learning_rate") == 1e-3
    assert step(sequence, "scale_by_learning_rate").arg_value("flip_sign") is True  # a const

    sequence = only_sequence(pipeline_named(f, "default"))
    assert step(sequence, "add_decayed_weights").arg_value("weight_decay") == 1e-4  # table default
    assert step(sequence, "add_decayed_weights").arg_value("mask") is None
    adam = step(sequence, "scale_by_adam")
    assert (adam.arg_value("b1"), adam.arg_value("b2"), adam.arg_value("eps")) == (0.9, 0.999, 1e-8)
    # A parameter the alias does not pass to this primitive.
    assert isinstance(adam.arg_value("learning_rate"), Unknown)


def test_adafactor_expansion_and_final_sign_flip() -> None:
    f = facts(
        """
        import optax
        default = optax.adafactor()
        with_lr = optax.adafactor(1e-3)
        custom = optax.adafactor(1e-3, momentum=0.9, weight_decay_rate=1e-3, clipping_threshold=None,
                                 multiply_by_parameter_scale=False)
        """
    )
    assert prims(pipeline_named(f, "default")) == [
        ["scale_by_factored_rms", "clip_by_block_rms", "scale_by_param_block_rms", "scale"]
    ]
    sequence = only_sequence(pipeline_named(f, "with_lr"))
    assert [s.primitive for s in sequence] == [
        "scale_by_factored_rms", "clip_by_block_rms", "scale_by_learning_rate", "scale_by_param_block_rms", "scale",
    ]
    # adafactor scales by the LR without flipping, then flips with scale(-1.0) at the end.
    assert step(sequence, "scale_by_learning_rate").negates() is False
    assert step(sequence, "scale").const == {"step_size": -1.0}
    assert [s.negates() for s in sequence] == [False, False, False, False, True]
    assert step(sequence, "clip_by_block_rms").arg_value("threshold") == 1.0

    sequence = only_sequence(pipeline_named(f, "custom"))
    assert [s.primitive for s in sequence] == [
        "scale_by_factored_rms", "scale_by_learning_rate", "ema", "add_decayed_weights", "scale",
    ]
    assert step(sequence, "ema").arg_value("decay") == 0.9
    assert step(sequence, "ema").arg_value("debias") is False
    assert step(sequence, "add_decayed_weights").arg_value("weight_decay") == 1e-3


def test_contrib_muon_is_an_alias_node() -> None:
    f = facts(
        """
        import optax
        tx = optax.contrib.muon(1e-3, adam_b1=0.8)
        """
    )
    root = only_pipeline(f).root
    assert (root.key, root.kind) == ("contrib.muon", "alias")
    assert root.args.value("learning_rate") == 1e-3
    assert root.args.value("adam_b1") == 0.8
    assert root.args.value("beta") == 0.95


# ---------------------------------------------------------------------------
# Consumers and update sites


def test_consumers_linked_to_pipelines() -> None:
    f = facts(
        """
        import optax
        from flax.training import train_state
        from flax import nnx
        tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))
        opt = optax.sgd(0.1)
        state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
        optimizer = nnx.Optimizer(model, opt, wrt=nnx.Param)
        by_keyword = nnx.Optimizer(model, tx=tx, wrt=nnx.Param)
        unknown = nnx.Optimizer(model, make_tx())
        """
    )
    tx, opt = pipeline_named(f, "tx"), pipeline_named(f, "opt")
    assert [(c.kind, code(c.tx_arg.value), c.pipeline) for c in f.consumers] == [
        ("train_state", "tx", tx),
        ("nnx_optimizer", "opt", opt),
        ("nnx_optimizer", "tx", tx),
        ("nnx_optimizer", "make_tx()", None),
    ]


def test_consumer_with_inline_pipeline() -> None:
    f = facts(
        """
        import optax
        from flax.training.train_state import TrainState
        state = TrainState.create(apply_fn=f, params=p, tx=optax.adam(1e-3))
        """
    )
    (consumer,) = f.consumers
    assert consumer.pipeline is only_pipeline(f)
    assert consumer.pipeline.root.key == "adam"


def test_progress_bar_updates_are_no_update_sites() -> None:
    """rich's `progress.update(task, advance=1)` and a tqdm bar's `update(n, ...)` take
    two arguments like an optimizer's update; a receiver bound only to a progress bar is
    none. A name also bound to something else keeps its update."""
    f = facts(
        """
        import optax
        from rich.progress import Progress
        from tqdm import tqdm
        tx = optax.adam(1e-3)
        def run(batches, task, grads, opt_state, maybe):
            with Progress() as progress:
                progress.update(task, advance=1)
            bar = tqdm(batches)
            bar.update(1, 2)
            tx.update(grads, opt_state)
            other = tqdm(batches) if maybe else tx
            other.update(grads, opt_state)
        """
    )
    assert [code(s.receiver) for s in f.update_sites] == ["tx", "other"]


def test_update_sites() -> None:
    f = facts(
        """
        import optax
        tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3))
        tx2 = optax.sgd(0.1)
        def step(params, opt_state, grads, state, some_dict, other):
            updates, opt_state = tx.update(grads, opt_state, params)
            u2, s2 = tx2.update(grads, opt_state)
            params = optax.apply_updates(params, updates)
            state = state.apply_gradients(grads=grads)
            some_dict.update(other)
            return params
        """
    )
    sites = f.update_sites
    assert [(s.kind, s.receiver and code(s.receiver)) for s in sites] == [
        ("update", "tx"),
        ("update", "tx2"),
        ("apply_updates", None),
        ("apply_gradients", "state"),
    ]
    assert sites[0].pipeline is pipeline_named(f, "tx")
    assert sites[1].pipeline is pipeline_named(f, "tx2")
    assert sites[2].pipeline is None and sites[3].pipeline is None
    # Arguments by position or keyword.
    assert code(sites[0].arg(2, "params").value) == "params"
    assert sites[1].arg(2, "params") is None
    assert code(sites[3].arg(0, "grads").value) == "grads"
    assert sites[3].has_keyword("grads") and not sites[3].has_star
    assert all(s.record.scope.name == "step" for s in sites)


def test_update_on_unknown_receiver_has_no_pipeline() -> None:
    f = facts(
        """
        import optax
        def step(tx, grads, opt_state):
            return tx.update(grads, opt_state)
        """
    )
    (site,) = f.update_sites
    assert site.kind == "update"
    assert site.pipeline is None


# ---------------------------------------------------------------------------
# Arguments


def test_positional_arguments_get_parameter_names() -> None:
    f = facts(
        """
        import optax
        tx = optax.adamw(1e-3, 0.9)
        """
    )
    args = only_pipeline(f).root.args
    assert {k: code(a.value) for k, a in args.by_name.items()} == {"learning_rate": "1e-3", "b1": "0.9"}
    assert args.given("b1") and not args.given("b2")
    assert args.value("b1") == 0.9
    assert args.positional_count() == 2
    # Not given: the table's default (literal, or None for a None default).
    assert args.value("b2") == 0.999
    assert args.value("weight_decay") == 1e-4
    assert args.value("nesterov") is False
    assert args.value("mask") is None
    assert args.expr("mask") is None


def test_extra_positionals_and_unknown_keywords_are_unmatched() -> None:
    f = facts(
        """
        import optax
        tx = optax.adamw(1e-3, 0.9, 0.99, 1e-8, 0.0, None, 0.1, None, True, foo=1)
        """
    )
    args = only_pipeline(f).root.args
    # nesterov is keyword-only: a ninth positional does not reach it.
    assert list(args.by_name) == ["learning_rate", "b1", "b2", "eps", "eps_root", "mu_dtype", "weight_decay", "mask"]
    assert [code(a.value) for a in args.unmatched] == ["True", "1"]
    assert args.value("nesterov") is False


def test_star_arguments_make_values_unknown() -> None:
    f = facts(
        """
        import optax
        a = optax.adamw(*args)
        b = optax.adamw(1e-3, **kwargs)
        """
    )
    a = pipeline_named(f, "a").root.args
    assert a.has_star
    assert isinstance(a.value("learning_rate"), Unknown)
    assert isinstance(a.value("b1"), Unknown)
    b = pipeline_named(f, "b").root.args
    assert b.has_star
    assert b.value("learning_rate") == 1e-3  # given explicitly: still known
    assert isinstance(b.value("weight_decay"), Unknown)  # might come from **kwargs
    assert b.value("weight_decay").reason == "arguments passed with * or **"


def test_required_parameter_without_default_is_unknown() -> None:
    f = facts(
        """
        import optax
        tx = optax.adam()
        """
    )
    assert only_pipeline(f).root.args.value("learning_rate") == Unknown("no default for 'learning_rate'")


def test_chain_positionals_go_to_varargs() -> None:
    f = facts(
        """
        import optax
        tx = optax.chain(optax.clip(1.0), optax.adam(1e-3), *more)
        """
    )
    args = only_pipeline(f).root.args
    assert [code(a.value) for a in args.varargs] == ["optax.clip(1.0)", "optax.adam(1e-3)", "more"]
    assert args.has_star and args.by_name == {}


# ---------------------------------------------------------------------------
# Values


MODULE = """
total_steps = 10_000
lr = 3e-4
twice = 1
twice = 2
flipflop = 1.0
flipflop = -1.0
a, b = 1, 2
(c, (d, e)) = (1, (2, 3))
n: int = 7
name = "adam"
joined = "ad" "am"
big = 10 ** 100000
tower = 9 ** 9 ** 9
warmup = int(0.05 * total_steps)
def train(cfg, learning_rate=1e-3, flip=-2.0):
    local = total_steps // 4
    def inner():
        return local
    return local
"""


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("1e-3", 1e-3),
        ("10_000", 10_000),
        ("0x10", 16),
        ("1e-3 * 8", 0.008),
        ("-3", -3),
        ("-1e-3", -1e-3),
        ("+2", 2),
        ("2 ** -1", 0.5),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("'adam'", "adam"),
        ("r'\\n'", "\\n"),
        ("True", True),
        ("None", None),
        ("(1, 2.5)", (1, 2.5)),
        ("[1, 'x']", [1, "x"]),
        ("{'w': 0.1}", {"w": 0.1}),
        ("min(3, 1)", 1),
        ("round(2.567, 2)", 2.57),
        ("abs(-3)", 3),
        ("total_steps", 10_000),
        ("int(0.05 * total_steps)", 500),
        ("warmup", 500),
        ("-lr", -3e-4),
        ("a", 1),
        ("b", 2),
        ("c", 1),
        ("e", 3),
        ("n", 7),
        ("name", "adam"),
        ("joined", "adam"),
    ],
)
def test_known_values(expr: str, expected) -> None:
    result = value(MODULE, expr)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("twice", "'twice' is assigned more than once"),
        ("config.lr", "not a literal (Attribute)"),
        ("undefined", "'undefined' is not assigned in this file"),
        ("big", "power too large"),
        ("tower", "power too large"),
        ("10 ** 10 ** 10", "power too large"),
        ("1 / 0", "arithmetic error"),
        ("1e308 * 10", "non-finite arithmetic"),
        ("'a' * 10 ** 9", "arithmetic on non-numbers"),
        ("[0] * 10 ** 9", "arithmetic on non-numbers"),
        ("float('inf')", "builtin on non-numbers"),
        ("int(x=1)", "builtin call form"),
        ("f'{lr}'", "not a literal (FormattedString)"),
        ("1 << 3", "operator"),
        ("-True", "unary operation"),
        ("(1, twice)", "'twice' is assigned more than once"),
        ("train", "'train' is a def, not a plain assignment"),
        ("optax.adam(1e-3)", "not a literal (Call)"),
    ],
)
def test_unknown_values(expr: str, reason: str) -> None:
    result = value(MODULE, expr)
    assert result == Unknown(reason)
    assert not result  # an Unknown is never truthy


def test_huge_powers_do_not_hang() -> None:
    start = time.perf_counter()
    assert value(MODULE, "big") == Unknown("power too large")
    assert value(MODULE, "(10 ** 6) ** 64 ** 64") == Unknown("power too large")
    assert value(MODULE, "2 ** 64") == 2**64
    assert time.perf_counter() - start < 2.0


def test_values_in_function_scopes() -> None:
    assert value(MODULE, "local", "train") == 2500
    assert value(MODULE, "local", "inner") == 2500  # enclosing function
    assert value(MODULE, "total_steps", "train") == 10_000  # module, seen from a function
    assert value(MODULE, "local") == Unknown("'local' is not assigned in this file")
    assert value(MODULE, "learning_rate", "train") == Unknown("'learning_rate' is a param, not a plain assignment")


def test_values_through_rebinding_kinds() -> None:
    src = """
    x = 1
    x += 1
    for i in range(3):
        y = i
    if cond:
        z = 5
    with open(p) as fh:
        pass
    (w := 4)
    def set_global():
        global g
        g = 1
    g = 2
    """
    assert value(src, "x") == Unknown("'x' is assigned more than once")
    assert value(src, "y") == Unknown("'i' is a for, not a plain assignment")
    assert value(src, "z") == 5  # bound once: where the branch did not run, `z` is a NameError
    assert value(src, "fh") == Unknown("'fh' is a with, not a plain assignment")
    assert value(src, "w") == Unknown("'w' is a walrus, not a plain assignment")
    assert value(src, "g") == Unknown("'g' is assigned more than once")  # `global g` binds at module level


def test_unpacking_from_unknown_value() -> None:
    src = """
    a, b = make_pair()
    c, d = b, 2
    """
    assert value(src, "a") == Unknown("'a' is unpacked from an unknown value")
    assert value(src, "c") == Unknown("'c' is unpacked from an unknown value")
    # The right-hand side is evaluated as a whole: one unknown element spoils it.
    assert value(src, "d") == Unknown("'d' is unpacked from an unknown value")


def test_shadowed_builtin_is_not_evaluated() -> None:
    src = """
    def int(x):
        return 0
    n = int(3.5)
    """
    assert value(src, "n") == Unknown("'int' is shadowed")


def test_value_depth_is_bounded() -> None:
    deep = " + ".join(["1"] * 200)
    assert value("", deep) == Unknown("expression too deep")


# -- signs ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "scope", "expected"),
    [
        ("1e-3", "<module>", 1),
        ("-1e-3", "<module>", -1),
        ("0.0", "<module>", 0),
        ("-lr", "<module>", -1),  # lr = 3e-4 at module level
        ("learning_rate", "train", 1),  # parameter with a positive default
        ("-learning_rate", "train", -1),
        ("flip", "train", -1),  # parameter with a negative default
        ("-flip", "train", 1),
        ("-cfg", "train", None),  # parameter without default, not lr-like
        ("-cfg.learning_rate", "train", -1),  # lr-like attribute
        ("-config.base_lr * 2", "<module>", -1),
        ("peak_lr", "<module>", 1),  # lr-like name, not assigned here
        ("-step_size / 2", "<module>", -1),
        ("beta", "<module>", None),  # not lr-like
        ("flipflop", "<module>", None),  # assigned twice, with both signs
        ("-x * y", "<module>", None),
    ],
)
def test_sign_of(expr: str, scope: str, expected: Optional[int]) -> None:
    assert sign(MODULE, expr, scope) == expected


def test_sign_of_lr_like_parameter_without_default() -> None:
    src = """
    def make(learning_rate, config):
        pass
    """
    assert sign(src, "-learning_rate", "make") == -1
    assert sign(src, "-config.lr", "make") == -1
    assert sign(src, "-config", "make") is None


def test_sign_of_name_assigned_twice_with_negative_values() -> None:
    src = """
    if big:
        step_size = -1e-2
    else:
        step_size = -1e-3
    """
    assert sign(src, "step_size") in (-1, None)


def test_sign_of_parameter_default_naming_outer_variable() -> None:
    src = """
    step = -1.0
    def f(step=step):
        pass
    """
    assert sign(src, "step", "f") == -1


# ---------------------------------------------------------------------------
# Step.negates


NEGATES = """
import optax
def user_fn(count):
    return 1.0
sched = optax.cosine_decay_schedule(-1e-3, 100)
tx = optax.chain(
    optax.scale_by_learning_rate(1e-3),
    optax.scale(-1.0),
    optax.scale(0.5),
    optax.scale_by_schedule(optax.cosine_decay_schedule(-1e-3, 100)),
    optax.scale_by_schedule(user_fn),
    optax.scale_by_schedule(sched),
    optax.scale_by_learning_rate(-1e-3),
    optax.scale_by_learning_rate(1e-3, flip_sign=False),
    optax.scale_by_learning_rate(1e-3, flip_sign=flag),
    optax.scale_by_learning_rate(sched),
    optax.scale_by_learning_rate(config.lr),
    optax.scale(-lr),
    optax.scale(config.factor),
    optax.scale_by_adam(),
    my_transform(),
)
"""


def test_step_negates() -> None:
    sequence = only_sequence(pipeline_named(facts(NEGATES), "tx"))
    assert [(s.primitive, s.negates()) for s in sequence] == [
        ("scale_by_learning_rate", True),
        ("scale", True),
        ("scale", False),
        ("scale_by_schedule", True),  # negative schedule
        ("scale_by_schedule", None),  # user function: unknown
        ("scale_by_schedule", True),  # negative schedule through a name
        ("scale_by_learning_rate", False),  # negative LR and flip: ascends
        ("scale_by_learning_rate", False),  # flip_sign=False
        ("scale_by_learning_rate", None),  # flip_sign unknown
        ("scale_by_learning_rate", False),  # negative schedule as the LR, flipped
        ("scale_by_learning_rate", True),  # unknown LR is positive
        ("scale", True),  # -lr
        ("scale", None),  # unknown factor
        ("scale_by_adam", False),
        ("<unknown>", None),
    ]
    assert [s.is_lr_step for s in sequence[:3]] == [True, True, False]


def test_alias_lr_step_negates_and_respects_negative_lr() -> None:
    f = facts(
        """
        import optax
        down = optax.adam(1e-3)
        up = optax.adam(-1e-3)
        def make(learning_rate=3e-4):
            return optax.sgd(learning_rate)
        """
    )
    assert only_sequence(pipeline_named(f, "down"))[-1].negates() is True
    assert only_sequence(pipeline_named(f, "up"))[-1].negates() is False
    assert only_sequence(only_pipeline_in(f, "make"))[-1].negates() is True


# ---------------------------------------------------------------------------
# Schedules


def test_schedules_kinds_values_and_names() -> None:
    f = facts(
        """
        import optax
        from optax import schedules
        total_steps = 10_000
        warmup = optax.linear_schedule(0.0, 1e-3, int(0.05 * total_steps))
        decay = optax.cosine_decay_schedule(1e-3, total_steps - 500)
        lr = optax.join_schedules([warmup, decay], boundaries=[500])
        wcd = schedules.warmup_cosine_decay_schedule(init_value=0.0, peak_value=3e-4, warmup_steps=100,
                                                     decay_steps=total_steps)
        tx = optax.adamw(lr)
        """
    )
    by_name = {s.name: s for s in f.schedules}
    assert [(s.key, s.name) for s in f.schedules] == [
        ("linear_schedule", "warmup"),
        ("cosine_decay_schedule", "decay"),
        ("join_schedules", "lr"),
        ("warmup_cosine_decay_schedule", "wcd"),
    ]
    warmup = by_name["warmup"]
    assert {p: warmup.value(p) for p in warmup.entry.params} == {
        "init_value": 0.0, "end_value": 1e-3, "transition_steps": 500, "transition_begin": 0,
    }
    assert by_name["decay"].value("decay_steps") == 9500
    assert by_name["decay"].value("alpha") == 0.0  # default
    wcd = by_name["wcd"]
    assert (wcd.value("peak_value"), wcd.value("warmup_steps"), wcd.value("decay_steps"), wcd.value("end_value")) == (
        3e-4, 100, 10_000, 0.0,
    )
    join = by_name["lr"]
    assert join.pieces == [warmup, by_name["decay"]]
    assert join.value("boundaries") == [500]
    assert [s.sign() for s in f.schedules] == [1, 1, 1, 1]


def test_join_schedules_with_inline_pieces_and_signs() -> None:
    f = facts(
        """
        import optax
        mixed = optax.join_schedules(
            schedules=[optax.constant_schedule(-1e-3), optax.exponential_decay(-1e-3, 10, 0.5)],
            boundaries=[10],
        )
        zero = optax.constant_schedule(0.0)
        unknown = optax.constant_schedule(cfg.lr)
        """
    )
    join = next(s for s in f.schedules if s.name == "mixed")
    assert [p.key for p in join.pieces] == ["constant_schedule", "exponential_decay"]
    assert join.sign() == -1
    assert next(s for s in f.schedules if s.name == "zero").sign() == 0
    assert next(s for s in f.schedules if s.name == "unknown").sign() is None


def test_schedule_of_resolves_through_names() -> None:
    f = facts(
        """
        import optax
        peak = 1e-3
        lr = optax.warmup_cosine_decay_schedule(0.0, peak, 100, 1000)
        alias = lr
        tx = optax.adamw(alias)
        """
    )
    lr_arg = pipeline_named(f, "tx").root.args.expr("learning_rate")
    schedule = f.schedule_of(lr_arg, f.raw.module_scope)
    assert schedule is not None
    assert schedule.key == "warmup_cosine_decay_schedule"
    assert schedule.name == "lr"
    assert schedule.value("peak_value") == 1e-3
    # The LR step of the alias sees the schedule.
    lr_step = only_sequence(pipeline_named(f, "tx"))[-1]
    assert lr_step.arg_sign("learning_rate") == 1
    assert lr_step.negates() is True


# ---------------------------------------------------------------------------
# Walker records


def test_walker_scopes_and_bindings() -> None:
    f = facts(
        """
        import optax
        class Trainer:
            rate = 1e-3
            def make(self, lr=1e-3, *args, scale, **kwargs):
                fn = lambda p: p * 2
                return optax.sgd(lr)
        if flag:
            opt = optax.adam(1e-3)
        for k in range(3):
            acc = k
        """
    )
    assert [(s.kind, s.name) for s in f.raw.scopes] == [
        ("module", "<module>"),
        ("class", "Trainer"),
        ("function", "make"),
        ("lambda", "<lambda>"),
    ]
    make = scope_named(f, "make")
    assert list(make.params) == ["self", "lr", "scale", "args", "kwargs"]
    assert [r.node.value is not None for r in make.returns] == [True]
    module = f.raw.module_scope
    assert [b.kind for b in module.bindings["optax"]] == ["import"]
    assert module.bindings["optax"][0].qualname == "optax"
    (opt,) = module.bindings["opt"]
    assert (opt.kind, opt.conditional, opt.in_loop) == ("assign", True, False)
    (acc,) = module.bindings["acc"]
    assert (acc.conditional, acc.in_loop) == (True, True)
    assert [b.kind for b in module.bindings["k"]] == ["for"]
    assert "rate" in scope_named(f, "Trainer").bindings
    assert "rate" not in module.bindings
    assert len(f.raw.loops) == 1


def test_walker_call_records() -> None:
    f = facts(
        """
        import optax
        tx = optax.chain(optax.clip(1.0), optax.adam(1e-3))
        print(tx)
        def train(steps):
            for i in range(steps):
                while True:
                    if i:
                        step(i)
        """
    )
    records = {code(r.node.func): r for r in f.raw.calls}
    chain = records["optax.chain"]
    assert code(chain.assigned_to) == "tx"
    assert chain.parent_call is None
    assert not chain.is_expression_statement
    assert records["optax.clip"].parent_call is chain.node
    assert records["optax.clip"].assigned_to is None
    assert records["print"].is_expression_statement
    assert (records["range"].loop_depth, records["range"].conditional) == (0, False)
    assert (records["step"].loop_depth, records["step"].conditional) == (2, True)
    assert records["step"].scope.name == "train"
    assert [l.depth for l in f.raw.loops] == [0, 1]


def test_walker_records_calls_in_lambdas_and_decorators() -> None:
    f = facts(
        """
        import jax
        @jax.jit
        @partial(jax.jit, static_argnums=0)
        def step(x):
            return jax.tree.map(lambda g: jnp.clip(g, -1, 1), x)
        """
    )
    scopes = {code(r.node.func): r.scope.kind for r in f.raw.calls}
    assert scopes == {"partial": "module", "jax.tree.map": "function", "jnp.clip": "lambda"}


def test_walker_records_interesting_attributes_only() -> None:
    f = facts(
        """
        state.opt_state.hyperparams["learning_rate"] = 1e-3
        y = model.layers.dense
        tx.update(g, s)
        """
    )
    assert sorted(a.node.attr.value for a in f.raw.attributes) == ["hyperparams", "opt_state", "update"]


def test_walk_is_preorder_and_skips_whitespace() -> None:
    module = cst.parse_module("f(a, b)\n")
    names = [n.value for n in walk(module) if isinstance(n, cst.Name)]
    assert names == ["f", "a", "b"]
    assert not any(isinstance(n, (cst.BaseParenthesizableWhitespace, cst.Comma)) for n in walk(module))


def _generated_module(functions: int) -> str:
    lines = ["import optax", "import jax", ""]
    for i in range(functions):
        lines += [
            f"def step_{i}(params, opt_state, grads, cfg):",
            f"    lr_{i} = cfg.lr * {i + 1}",
            f"    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(lr_{i}, weight_decay=1e-4))",
            f"    if cfg.flag_{i}:",
            "        grads = jax.tree.map(lambda g: g * 0.5, grads)",
            "    for k in range(3):",
            "        params = {'w': params['w'] + k, 'b': [1, 2, 3]}",
            "    updates, opt_state = tx.update(grads, opt_state, params)",
            "    return optax.apply_updates(params, updates), opt_state",
            "",
        ]
    return "\n".join(lines)


def test_walker_performance_on_a_5000_line_module() -> None:
    src = _generated_module(500)
    assert len(src.splitlines()) >= 5000
    module = cst.parse_module(src)
    timings = []
    for _ in range(3):
        # CPU time of this process: the cores are shared, wall time is not ours.
        start = time.process_time()
        raw = collect(module)
        timings.append(time.process_time() - start)
    assert len(raw.calls) == 500 * 7
    assert len(raw.scopes) == 1 + 500 * 2  # module + functions + lambdas
    assert min(timings) < 1.0, timings
    # The derived facts are cheap too and find every pipeline and update site.
    f = ModuleFacts(module, "big.py")
    assert len(f.pipelines) == 500
    assert [s.kind for s in f.update_sites[:2]] == ["update", "apply_updates"]
    assert all(s.pipeline is not None for s in f.update_sites if s.kind == "update")


@pytest.mark.parametrize(
    ("src", "nodes", "expected"),
    [
        # 499 BinaryOperations + 500 Integers
        ("x = " + " + ".join(["1"] * 500), 999, Unknown("expression too deep")),
        ("x = " + "-" * 500 + "1", 501, Unknown("expression too deep")),
        ("x = " + "(" * 500 + "1" + ")" * 500, 1, 1),  # parentheses are not nodes
        ("x = " + "a." * 500 + "b", 1001, Unknown("not a literal (Attribute)")),
    ],
)
def test_walker_survives_deep_parsed_nesting(src: str, nodes: int, expected) -> None:
    module = cst.parse_module(src)
    raw = collect(module)
    assert list(raw.module_scope.bindings) == ["x"]
    value_node = module.body[0].body[0].value
    assert sum(1 for _ in walk(value_node)) == nodes
    assert value_of(value_node, raw.module_scope) == expected


def _nested_calls(depth: int, func: cst.BaseExpression, leaf: cst.BaseExpression) -> cst.BaseExpression:
    expr = leaf
    for _ in range(depth):
        expr = cst.Call(func=func, args=[cst.Arg(expr)])
    return expr


def test_walker_is_iterative_beyond_the_recursion_limit() -> None:
    # Built directly (libcst's parser is slow on deep nesting); deeper than the
    # interpreter's recursion limit, so a recursive walker would crash.
    depth = sys.getrecursionlimit() + 500
    nested = _nested_calls(depth, cst.Name("f"), cst.Name("x"))
    module = cst.Module([cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name("y"))], nested)])])
    raw = collect(module)
    assert len(raw.calls) == depth
    assert raw.calls[0].assigned_to is not None
    assert raw.calls[-1].parent_call is raw.calls[-2].node
    assert sum(1 for _ in walk(module)) > 2 * depth


def test_deeply_nested_chains_give_one_bounded_pipeline() -> None:
    chain = cst.Attribute(cst.Name("optax"), cst.Name("chain"))
    leaf = cst.Call(cst.Attribute(cst.Name("optax"), cst.Name("scale")), args=[cst.Arg(cst.parse_expression("-1.0"))])
    module = cst.Module(
        [
            cst.parse_statement("import optax"),
            cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name("tx"))], _nested_calls(500, chain, leaf))]),
        ]
    )
    f = ModuleFacts(module, "deep.py")
    assert len(f.raw.calls) == 501
    pipeline = only_pipeline(f)
    assert pipeline.name == "tx"
    unknown = [n for n in pipeline.nodes() if n.kind == "unknown"]
    assert [n.reason for n in unknown] == ["pipeline too deep"]
    assert prims(pipeline) == [["<unknown>"]]


def test_children_leave_out_only_fields_that_cannot_hold_a_node() -> None:
    # walker.children skips fields declared str or Literal (and whitespace/punctuation
    # by name): on real-looking scripts it gives exactly the nodes a scan of every
    # other dataclass field finds, in the same order.
    import dataclasses
    from pathlib import Path

    from optax_lint.syntax.walker import _SKIP_FIELDS, children

    def reference(node: cst.CSTNode) -> list:
        out = []
        for f in dataclasses.fields(node):
            if f.name in _SKIP_FIELDS:
                continue
            value = getattr(node, f.name)
            for item in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(item, cst.CSTNode):
                    out.append(item)
        return out

    fixtures = sorted((Path(__file__).resolve().parents[1] / "fixtures").glob("OPX1*/*.py"))[:60]
    kinds = set()
    for path in fixtures:
        for node in walk(cst.parse_module(path.read_text(encoding="utf-8"))):
            kinds.add(type(node).__name__)
            got, want = children(node), reference(node)
            assert len(got) == len(want) and all(a is b for a, b in zip(got, want)), (path.name, type(node).__name__)
    assert {"Name", "Integer", "SimpleString", "Arg", "Call", "Attribute"} <= kinds
