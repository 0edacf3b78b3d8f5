"""Bound and constant calculators, one module per paper (``afl.theory.favas``, ...)."""
