"""afl: asynchronous and heterogeneous federated learning, for teaching and reproduction."""
__version__ = "0.1.0"

from .runtime import flush_denormals as _flush_denormals

_flush_denormals()         # before PyTorch starts its worker threads, which inherit it (afl.runtime)
