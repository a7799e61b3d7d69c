"""Rule implementations, one module per family; importing them fills REGISTRY."""

from .base import REGISTRY, Rule, register  # noqa: F401
from . import chain_order, construction  # noqa: F401  (registration side effect)
