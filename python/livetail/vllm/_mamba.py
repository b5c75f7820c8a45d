"""vLLM's Mamba "align" mode on state groups with live tail (semantics 13.5): the checks and
the one rule of vLLM's MambaManager the core leaves to the engine (a request does not resume
from a state named in the same step, which that step's forward has not written yet)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import livetail

from ._groups import unsupported


def align_groups(
    specs: Sequence[livetail.GroupSpec], hash_block_size: int, caching: bool, drafts: bool
) -> list[int]:
    """The state groups with live tail (Mamba "align" mode). Refused by name: hashing finer
    than a Mamba block (vLLM then hits inside a block and copies the cached state on write,
    and its shared-prefix checkpoints need it: without it vLLM's
    ``enable_mamba_shared_prefix_checkpoint`` is a no-op, and so it is here), and
    speculative decoding."""
    groups = [g for g, s in enumerate(specs) if s.kind == "state" and s.live_tail_alloc]
    if groups and drafts:
        raise unsupported('Mamba "align" mode with speculative decoding')
    for g in groups:
        B = specs[g].block_size
        if caching and hash_block_size < B:
            raise unsupported(
                f'Mamba "align" mode with hashing finer than the Mamba block ({hash_block_size} '
                f"< {B}, group {g}: partial-hit copy-on-write)"
            )
    return groups


def check_align_step(
    specs: Sequence[livetail.GroupSpec],
    groups: Sequence[int],
    extent: int,
    more: int,
    lookahead: int,
) -> None:
    """Refuse a step that starts inside a page and passes that page's end: the page would
    keep the state of the step before (vLLM writes a step's state only at its end) and be
    named as the state at its end. vLLM's scheduler never makes such a step without
    speculative tokens (refused): a prompt's chunks end on pages but for the last, and
    decode advances one token at a time."""
    if lookahead:
        raise unsupported('Mamba "align" mode with speculative decoding')
    for g in groups:
        B = specs[g].block_size
        tail = -extent % B
        if tail and more > tail:
            raise unsupported(
                f'Mamba "align" mode: a step of {more} tokens from inside a page (group {g})'
            )


def note_state_names(
    named: set[int],
    r: Any,
    specs: Sequence[livetail.GroupSpec],
    groups: Sequence[int],
    base: int,
    n: int,
) -> None:
    """Record the pages of the state groups' slots from the request's naming cursor
    (``r.named_keys`` base pages) to n tokens that now carry a name: the real ones."""
    lo_tokens = r.named_keys * base
    for g in groups:
        B = specs[g].block_size
        pages = r.tables[g].page_ids()[lo_tokens // B : n // B].tolist()
        named.update(p for p in pages if p)


def state_named_now(
    match: livetail.PrefixMatch, groups: Sequence[int], named: set[int]
) -> bool:
    """Does the match resume a state group from a page named this step? (That step's
    forward writes it: vLLM's ``cached_blocks_this_step`` defers such a hit a step.)"""
    for g in groups:
        pages = match.pages[g]
        if len(pages) and int(pages[-1]) in named:
            return True
    return False
