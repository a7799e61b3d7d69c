"""Inferring the run context from the code (see run_context.py for the interface).

One reader per field, each called at most once per file and only when a rule (or
`--show-context`) asks for a field nobody declared. What is read, per field:

- arch: the model classes in the file (flax.linen / nnx / haiku / equinox layers:
  attention -> transformer, Conv -> cnn, LSTM/GRU cells -> rnn, only Dense -> mlp),
  following classes used by classes, and the project modules the file imports its
  model from; class names (Transformer, GPT, BERT, ViT, ResNet, ...) when no layer
  settles it.
- steps: the training loop (`for step in range(N)` around the train step, times an
  enclosing `for epoch in range(E)`, or E x steps_per_epoch around a data loop;
  `while step < N`), then names (`num_train_steps`, `total_steps`, `max_steps`, ...),
  then `epochs * steps_per_epoch`. Values may come from config objects resolved
  across files (facts/project/). Loop iterations are micro-batches under
  MultiSteps(k): steps = iterations // k.
- devices: `--xla_force_host_platform_device_count=N`, literal mesh shapes; a file
  with pmap/shard_map/mesh code whose device count is known only at run time stays
  unknown; a training loop with no multi-device code at all runs on 1 device.
- batch: `global_batch_size` / `per_device_batch_size` names; a plain `batch_size`
  is global when the code divides it by the device count, per-device when it
  multiplies it, and both on one device.
- grad_accum: `optax.MultiSteps(opt, every_k_schedule=k)`; 1 when the file builds its
  optimizer without MultiSteps.
- fine_tune: a checkpoint restored from a pretrained source (`from_pretrained`, a
  restore whose arguments say pretrained / init_checkpoint); False when the params
  come from `model.init` and nothing is restored or loaded.
- params: estimated for a Transformer from its config (layers L, width d, vocab V,
  MLP width d_ff, default 4d): params ~ L * (4 d^2 + 2 d d_ff) + V d.
"""

from __future__ import annotations

from typing import Optional

from optax_lint.facts.context.devices import (
    infer_batch_global,
    infer_batch_per_device,
    infer_devices,
)
from optax_lint.facts.context.evidence import Evidence
from optax_lint.facts.context.loops import infer_steps
from optax_lint.facts.context.models import infer_arch
from optax_lint.facts.context.multisteps import infer_grad_accum
from optax_lint.facts.context.run_context import ContextValue
from optax_lint.facts.context.weights import infer_fine_tune, infer_params

_READERS = {
    "arch": infer_arch,
    "params": infer_params,
    "steps": infer_steps,
    "batch_per_device": infer_batch_per_device,
    "batch_global": infer_batch_global,
    "devices": infer_devices,
    "grad_accum": infer_grad_accum,
    "fine_tune": infer_fine_tune,
}


class Inference(Evidence):
    """Infers one field when the run context first asks for it; the readers live in
    the modules named by field (models, weights, loops, devices, multisteps)."""

    def infer(self, name: str, context) -> Optional[ContextValue]:
        reader = _READERS.get(name)
        if reader is None:
            return None
        self.context = context
        return reader(self, context)
