"""The whole-prompt charge (semantics 13.1) on a coordinator: the sum over its groups.

Each group's closed form is the manager's (``spec/geometry.py``, "one dispatch per kind");
this mixin sums them over one request's tables, or over a prefix match it would claim.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from ._args import bounded, count
from .managers import _Manager
from .pool import BlockPool
from .prefix import PrefixMatch
from .table import BlockTable


class PromptCharges:
    """The coordinator's whole-prompt charges (Coordinator derives from this)."""

    _managers: list[_Manager]
    _pool: BlockPool
    _check_tables: Callable[[object], list[BlockTable]]
    _check_match: Callable[[object], PrefixMatch]

    def blocks_needed_for_prompt(
        self, tables: Sequence[BlockTable], num_tokens: int, max_chunk_tokens: int,
        decode_tokens: int,
    ) -> int:
        """The whole-prompt charge (semantics 13.1): the sum over groups, O(1) per group.

        Bounds the pages the request takes from the pool at any moment while it computes
        num_tokens in chunks of at most max_chunk_tokens, reclaiming before each chunk, then
        acquires decode_tokens; equals that peak for some chunking (tables reclaimed at
        their extent, no page shared). With a prefix hit: blocks_needed_for_prompt_after_claim.
        """
        count("num_tokens", num_tokens)  # the counts first, then the tables (as native)
        bounded("max_chunk_tokens", max_chunk_tokens, 1, sys.maxsize)
        count("decode_tokens", decode_tokens)
        ts = self._check_tables(tables)
        return sum(
            m.blocks_needed_for_prompt(t, num_tokens, max_chunk_tokens, decode_tokens)
            for m, t in zip(self._managers, ts)
        )

    def blocks_needed_for_prompt_after_claim(
        self, match: PrefixMatch, num_tokens: int, max_chunk_tokens: int, decode_tokens: int
    ) -> int:
        """The whole-prompt charge of a request that first claims ``match`` into fresh tables
        (semantics 13.1 with a prefix hit): the most free pages the pool gives up at once,
        the claim's own included, while it then computes num_tokens more tokens in chunks of
        at most max_chunk_tokens and acquires decode_tokens. A claimed page another holder
        pins gives nothing back when reclaim releases it. Sum over groups; read-only.
        """
        n = count("num_tokens", num_tokens)
        C = bounded("max_chunk_tokens", max_chunk_tokens, 1, sys.maxsize)
        d = count("decode_tokens", decode_tokens)
        mt = self._check_match(match)
        ref = self._pool.ref_count
        return sum(
            m.prompt_after_claim(mt.num_tokens, pages, hps, ref, n, C, d)
            for m, pages, hps in zip(self._managers, mt._pages, mt._host_pages)
        )
