"""Whether training goes on after a call (facts/checkpoints/continues.py): what makes a
restore a resume for OPX502 and OPX501."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from optax_lint.facts.checkpoints.continues import trains_after
from optax_lint.facts.module import ModuleFacts

STEP = """
import jax
import optax

tx = optax.adam(1e-3)

def train_step(params, opt_state, batch):
    grads = jax.grad(loss)(params, batch)
    updates, opt_state = tx.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state
"""


def _after(src: str, marker: str = "restore_here") -> bool:
    text = textwrap.dedent(STEP + src)
    facts = ModuleFacts(cst.parse_module(text), "train.py", text=text)
    [record] = [r for r in facts.raw.calls if isinstance(r.node.func, cst.Name) and r.node.func.value == marker]
    return trains_after(facts, record)


@pytest.mark.parametrize(
    "src, expected",
    [
        # a loop later in the same function
        ("def main():\n    params = restore_here()\n    for b in data:\n        params, s = train_step(params, s, b)\n", True),
        # the loop ran before: the restore feeds an evaluation
        ("def main():\n    for b in data:\n        params, s = train_step(params, s, b)\n    params = restore_here()\n    evaluate(params)\n", False),
        # a helper whose caller trains afterwards
        ("def resume():\n    return restore_here()\n\ndef main():\n    params = resume()\n"
         "    for b in data:\n        params, s = train_step(params, s, b)\n", True),
        # a helper nothing in the file calls: unknown, so no resume is claimed
        ("def resume():\n    return restore_here()\n", False),
        # a training loop defined elsewhere, known by its name
        ("def main():\n    state = restore_here()\n    train_lib.train_and_evaluate(state, workdir)\n", True),
    ],
)
def test_functions(src: str, expected: bool) -> None:
    assert _after(src) is expected


TRAINER = """
class Trainer:
    def __init__(self):
        self.params = init()
        {init_body}

    def train_model(self, data):
        for b in data:
            self.params, self.s = train_step(self.params, self.s, b)

    def load(self):
        self.params = restore_here()

    def evaluate(self):
        return score(self.params)
"""


@pytest.mark.parametrize(
    "init_body, driver, expected",
    [
        ("pass", "t = Trainer()\nt.load()\nt.train_model(data)\n", True),
        ("pass", "t = Trainer()\nt.train_model(data)\nt.load()\nt.evaluate()\n", False),
        # another trainer's run after this one's reload is not its resume
        ("pass", "t = Trainer()\nt.train_model(data)\nt.load()\nu = Trainer()\nu.train_model(data)\n", False),
        # a method that calls load() on self, then trains on self
        ("pass", "t = Trainer()\nt.resume_and_train(data)\n", True),
        # the reload inside the constructor, the object trained afterwards
        ("self.load()", "t = Trainer()\nt.train_model(data)\n", True),
        ("self.load()", "t = Trainer()\nt.evaluate()\n", False),
    ],
)
def test_methods(init_body: str, driver: str, expected: bool) -> None:
    trainer = TRAINER.format(init_body=init_body)
    if "resume_and_train" in driver:
        trainer += "\n    def resume_and_train(self, data):\n        self.load()\n        self.train_model(data)\n"
    assert _after(trainer + "\n" + driver) is expected


def test_a_method_of_the_class_that_reloads_then_trains_is_a_resume_path_even_uncalled() -> None:
    trainer = TRAINER.format(init_body="pass")
    trainer += "\n    def resume_and_train(self, data):\n        self.load()\n        self.train_model(data)\n"
    assert _after(trainer + "\nt = Trainer()\nt.evaluate()\n") is True


_SWITCHED = """
def load(path):
    return restore_here(path)

def build(lr, load_from=""):
    params = init()
    if load_from:
        params = load(load_from)
    return params

def train(lr{signature}):
    params = build(lr{passed})
    for b in data:
        params, s = train_step(params, s, b)
"""


@pytest.mark.parametrize(
    "signature, passed, expected",
    [
        ("", "", False),  # the loader behind `if load_from:` never runs on the training path
        (", resume=''", ", load_from=resume", True),  # training passes it: a resume
        (", resume=''", ", resume", True),  # by position
        (", **kw", ", **kw", True),  # may hold it
    ],
)
def test_a_restore_behind_a_switch_the_training_caller_leaves_off(signature: str, passed: str, expected: bool) -> None:
    assert _after(_SWITCHED.format(signature=signature, passed=passed)) is expected


def test_a_restore_in_the_else_arm_of_the_switch_runs_when_the_switch_is_off() -> None:
    """The walker maps an `else:` block's statements to the `if` itself: the restore
    below sits in the arm that runs when `load_from` is left off, so it is a resume."""
    src = """
def build(lr, load_from=""):
    if load_from:
        params = init()
    else:
        params = restore_here(DEFAULT)
    return params

def train(lr):
    params = build(lr)
    for b in data:
        params, s = train_step(params, s, b)
"""
    assert _after(src) is True
