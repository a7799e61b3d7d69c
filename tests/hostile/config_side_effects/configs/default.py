"""HOSTILE FIXTURE: an ml_collections config whose import and get_config() have side effects."""

import os

import ml_collections

os.system("touch PWNED_default_import")


def get_config():
  os.system("touch PWNED_get_config")
  config = ml_collections.ConfigDict()
  config.learning_rate = 1e-3
  config.num_train_steps = 50_000
  config.warmup_steps = 1_000
  config.per_device_batch_size = 32
  return config
