"""A library's own package init, in optax's shape: it re-exports its private modules."""

from optax import contrib
from optax._src.alias import adam
from optax._src.alias import adamw
from optax._src.alias import sgd
from optax._src.base import GradientTransformation
from optax._src.transform import scale_by_adam
from optax._src.transform import trace

__all__ = ("adam", "adamw", "sgd", "GradientTransformation", "scale_by_adam", "trace", "contrib")
