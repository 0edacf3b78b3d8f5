"""afl: asynchronous and heterogeneous federated learning, for teaching and reproduction."""
__version__ = "0.1.0"

from .runtime import cap_threads as _cap_threads, flush_denormals as _flush_denormals

_flush_denormals()         # before PyTorch starts its worker threads, which inherit it (afl.runtime)
_cap_threads()             # no more PyTorch threads than the cores this process may use (afl.runtime)
