"""HOSTILE FIXTURE: a model module that runs a command when imported."""

import os

import flax.linen as nn

os.system("touch PWNED_models_import")


class MLP(nn.Module):
  @nn.compact
  def __call__(self, x):
    return nn.Dense(1)(nn.relu(nn.Dense(64)(x)))
