"""Rule implementations, one module per family. Every module in this package is
imported here, which fills REGISTRY through the @register decorator; adding a rule
family is adding a module."""

import importlib
import pkgutil

from optax_lint.rules.base import REGISTRY, Rule, register  # noqa: F401

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module != "base":
        importlib.import_module(f"{__name__}.{_module}")
