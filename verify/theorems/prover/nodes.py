"""Walking Z3 terms through the C API: the prover's hot loops over a formula's nodes.

The small-domain search reads every node of a step's formula several times (its symbols,
the bounds its hypotheses set, its bit-vector image).  Through z3py's wrappers each node
visited costs a Python object per child (``children()``, ``arg()``, ``decl().kind()``
each build and reference-count one), which made the search mostly Python: measured,
``coordinator-acquire-all-or-nothing`` spent 4 s in its small-domain search, of which
the Z3 queries were under a third.  Here a node is the C pointer its parent holds, named
by its ``Z3_get_ast_id``, and only the results are wrapped; what the walks return is the
same as the wrapper walks they replace (same terms, same order), so the queries built
from them, and their units, are unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import z3  # type: ignore[import-untyped]
from z3.z3 import _to_expr_ref  # type: ignore[import-untyped]

APP = (z3.Z3_APP_AST, z3.Z3_NUMERAL_AST)


class Walk:
    """A formula's nodes in one context (the formulas' own, z3py's main one by default)."""

    def __init__(self, ctx: z3.Context | None = None) -> None:
        self.ctx = ctx or z3.main_ctx()
        self.c = self.ctx.ref()

    def kind(self, a: Any) -> int:
        return int(z3.Z3_get_ast_kind(self.c, a))

    def ident(self, a: Any) -> int:
        return int(z3.Z3_get_ast_id(self.c, a))

    def args(self, a: Any) -> list[Any]:
        """The arguments of an application, the body of a quantifier (z3py's ``children``)."""
        c = self.c
        k = z3.Z3_get_ast_kind(c, a)
        if k in APP:
            return [z3.Z3_get_app_arg(c, a, i) for i in range(z3.Z3_get_app_num_args(c, a))]
        if k == z3.Z3_QUANTIFIER_AST:
            return [z3.Z3_get_quantifier_body(c, a)]
        return []

    def op(self, a: Any) -> int:
        """The kind of an application's function (``decl().kind()``); -1 for other nodes."""
        if z3.Z3_get_ast_kind(self.c, a) not in APP:
            return -1
        return int(z3.Z3_get_decl_kind(self.c, z3.Z3_get_app_decl(self.c, a)))

    def is_symbol(self, a: Any) -> bool:
        """An uninterpreted constant (z3py: ``is_const(a)`` and its decl uninterpreted)."""
        c = self.c
        return (
            z3.Z3_get_ast_kind(c, a) in APP
            and z3.Z3_get_app_num_args(c, a) == 0
            and z3.Z3_get_decl_kind(c, z3.Z3_get_app_decl(c, a)) == z3.Z3_OP_UNINTERPRETED
        )

    def sort_kind(self, a: Any) -> int:
        return int(z3.Z3_get_sort_kind(self.c, z3.Z3_get_sort(self.c, a)))

    def int_value(self, a: Any) -> int | None:
        """The value of an Int numeral (``is_int_value``), else None."""
        c = self.c
        if (
            z3.Z3_get_ast_kind(c, a) == z3.Z3_NUMERAL_AST
            and z3.Z3_get_sort_kind(c, z3.Z3_get_sort(c, a)) == z3.Z3_INT_SORT
        ):
            return int(z3.Z3_get_numeral_string(c, a))
        return None

    def wrap(self, a: Any) -> Any:
        """The z3py expression of a node (what ``children()`` would have returned)."""
        return _to_expr_ref(a, self.ctx)

    def nodes(self, roots: Sequence[Any]) -> Iterator[Any]:
        """Every node under ``roots`` once, depth first, the last child first: the order of
        a stack of ``children()`` lists."""
        seen: set[int] = set()
        stack = list(roots)
        while stack:
            a = stack.pop()
            i = self.ident(a)
            if i in seen:
                continue
            seen.add(i)
            yield a
            if not self.is_symbol(a):
                stack.extend(self.args(a))


def free_constants(e: Any) -> list[Any]:
    """The uninterpreted constants (the symbols) of a formula, each once, in the order of a
    depth-first walk that visits a node's last child first."""
    w = Walk(e.ctx)
    return [w.wrap(a) for a in w.nodes([e.as_ast()]) if w.is_symbol(a)]
