"""Suite-wide set-up.

Bytecode caching is switched on for the suite and every interpreter it starts (xdist
workers, CLI and verify subprocesses, the fixture runner): with PYTHONDONTWRITEBYTECODE
set, as on this workplace's machines, each of the suite's hundreds of interpreters
compiles the package (~28k lines) and pytest rewrites every test module from source
again (measured: a one-file CLI lint 1.08 s -> 0.79 s CPU, collection about a third
faster).
"""

import os
import sys

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
