"""One decision's CEL variables, converted from the Python context only when a rule reads them.

Converting a context to CEL values costs about a microsecond per string, far more than running a
rule, so each top-level variable is converted once, the first time an evaluated rule names it
(`Program.variables()`, the names the expression reads). A value CEL cannot convert (a lone surrogate,
a set) raises ValueError out of the decision, as converting the whole context did, but only once a
rule reading it runs; the gate refuses such values before any policy (runs/batch_input.py).
"""

from __future__ import annotations

import cel


class Activation:
    __slots__ = ("_context", "_unbound", "cel")

    def __init__(self, context: dict, *, lazy: bool = True) -> None:
        self._context = context
        self._unbound = set(context) if lazy else set()
        self.cel = cel.Context() if lazy else cel.Context(context)

    def bind(self, names: frozenset[str]) -> None:
        """Convert the variables among `names` that are not converted yet."""
        if self._unbound.isdisjoint(names):
            return
        for name in self._unbound & names:
            self.cel.add_variable(name, self._context[name])
            self._unbound.discard(name)
