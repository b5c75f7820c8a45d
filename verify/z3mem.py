"""``spec/pool_state.py``'s ``Mem`` over Z3 arrays: the pool's state as symbolic arrays.

Arrays and maps are ``Array(Int, Int)``: a page's count or link, a page's name (0: none),
a name's holder count (its list of pages, abstracted to its length), a name's token ids (an
opaque value).  Each write is a ``Store`` guarded by its condition, so the pool's
transitions run on a symbolic pool of any size, unchanged.
"""

from __future__ import annotations

from typing import Any

import z3  # type: ignore[import-untyped]

from .z3arith import Z3, Z3Arith


def _b(c: Any) -> Any:
    return z3.BoolVal(c) if isinstance(c, bool) else c


class Z3Mem:
    """``Mem`` over Z3 arrays (``spec/pool_state.py``)."""

    ar: Z3Arith = Z3

    def get(self, a: Any, i: Any) -> Any:
        return a[i]

    def put(self, a: Any, i: Any, v: Any, when: Any = True) -> Any:
        if when is True:
            return z3.Store(a, i, v)
        if when is False:
            return a
        return z3.Store(a, i, z3.If(_b(when), v, a[i]))

    def ite(self, c: Any, a: Any, b: Any) -> Any:
        if isinstance(c, bool):
            return a if c else b
        return z3.If(c, a, b)

    def ind(self, c: Any) -> Any:
        if isinstance(c, bool):
            return int(c)
        return z3.If(c, z3.IntVal(1), z3.IntVal(0))

    def has(self, m: Any, k: Any) -> Any:
        return m[k] != 0

    def at(self, m: Any, k: Any) -> Any:
        return m[k]

    def bind(self, m: Any, k: Any, v: Any, when: Any = True) -> Any:
        return self.put(m, k, v, when)

    def unbind(self, m: Any, k: Any, when: Any = True) -> Any:
        return self.put(m, k, 0, when)

    def holders(self, m: Any, k: Any) -> Any:
        return m[k]

    def join(self, m: Any, k: Any, page: Any, when: Any = True) -> Any:
        return self.put(m, k, m[k] + 1, when)

    def leave(self, m: Any, k: Any, page: Any, when: Any = True) -> Any:
        return self.put(m, k, m[k] - 1, when)

    def empty(self, m: Any) -> Any:
        return z3.K(z3.IntSort(), z3.IntVal(0))


Z3MEM = Z3Mem()
