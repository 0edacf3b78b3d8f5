"""One store for what clients keep between their participations.

SCAFFOLD's control variates, GHBM's momentum anchors, a hidden model shared by server and clients, or the
model a FAVAS client's current window started from: each is a per-client vector of the model's size. A
:class:`ClientState` keeps one ``(n, P)`` table per name, created on first use, so that a learner reads and
writes rows (``state["start"][clients]``) instead of keeping a dict of its own.
"""
from __future__ import annotations

from torch import Tensor

from ..checkpoint import checkpointable
from ..errors import check


@checkpointable
class ClientState:
    """Per-client tensors by name: ``(n, P)`` tables on the model's device and dtype, created on first use."""

    def __init__(self, n: int, like: Tensor):
        self.n, self._like = n, like
        self._tables: dict[str, Tensor] = {}

    def table(self, name: str, init: Tensor | float = 0.0) -> Tensor:
        """The ``(n, P)`` table ``name``; created with every row equal to ``init`` (a scalar or a ``(P,)``
        vector such as the initial model) if it does not exist yet."""
        if name not in self._tables:
            table = self._like.new_empty(self.n, self._like.numel())
            if isinstance(init, Tensor):
                check(init.shape == self._like.shape, "init", tuple(init.shape),
                      f"a scalar or {tuple(self._like.shape)}")
                table.copy_(init.expand_as(table))
            else:
                table.fill_(float(init))
            self._tables[name] = table
        return self._tables[name]

    def __getitem__(self, name: str) -> Tensor:
        check(name in self._tables, "name", name, "a table created with ClientState.table: "
              + (", ".join(map(repr, self._tables)) or "none yet"))
        return self._tables[name]

    def __contains__(self, name: str) -> bool:
        return name in self._tables

    def __repr__(self) -> str:
        return f"ClientState(n={self.n}, tables={list(self._tables)})"
