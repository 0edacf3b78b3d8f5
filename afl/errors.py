"""Errors raised by afl: every bad input names the parameter, the value given and what is allowed."""
from __future__ import annotations


class ParameterError(ValueError):
    """A parameter has a value outside what is allowed."""

    def __init__(self, name: str, value, allowed: str):
        self.name, self.value, self.allowed = name, value, allowed
        super().__init__(f"{name}={value!r} is not allowed; expected {allowed}")


class DataMissingError(ValueError):
    """A dataset file is absent from every searched directory and could not be downloaded."""


class ChecksumError(ValueError):
    """A dataset file exists but its MD5 differs from the expected one."""


def check(condition: bool, name: str, value, allowed: str) -> None:
    """Raise :class:`ParameterError` unless ``condition`` holds."""
    if not condition:
        raise ParameterError(name, value, allowed)


def check_choice(name: str, value, choices) -> None:
    """Raise :class:`ParameterError` unless ``value`` is one of ``choices``."""
    choices = list(choices)
    if value not in choices:
        raise ParameterError(name, value, "one of " + ", ".join(map(repr, choices)))
