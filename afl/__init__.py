"""afl: asynchronous and heterogeneous federated learning, for teaching and reproduction."""
__version__ = "0.1.0"
