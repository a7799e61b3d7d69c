"""A contrib package init in optax's shape."""

from optax.contrib._muon import muon
from optax._src.transform import scale_by_adam as _scale_by_adam
