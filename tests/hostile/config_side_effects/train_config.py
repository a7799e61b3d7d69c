"""HOSTILE FIXTURE: a config module with side effects at import. The linted train.py
imports it; optax-lint reads it for the run context and must never import it."""

import os
import socket
import subprocess

open("PWNED_config_import", "w").write("imported")
os.system("touch PWNED_config_system")
subprocess.Popen(["touch", "PWNED_config_popen"])
try:
    socket.create_connection(("198.51.100.7", 80), timeout=0.01)  # TEST-NET-2: never routable
except OSError:
    pass

LEARNING_RATE = 3e-4
NUM_TRAIN_STEPS = 10_000
WARMUP_STEPS = int(os.environ.get("WARMUP", "500"))
BATCH_SIZE = 256
