"""vLLM's Mamba "align" mode on state groups with live tail (semantics 13.5): the checks and
the one rule of vLLM's MambaManager the core leaves to the engine (a request does not resume
from a state named in the same step, which that step's forward has not written yet)."""

from __future__ import annotations

from collections.abc import Sequence

import livetail

from ._groups import unsupported


def check_align(
    specs: Sequence[livetail.GroupSpec], groups: Sequence[int], hash_block_size: int, caching: bool
) -> None:
    """Refuse, by name, hashing finer than a Mamba block: vLLM then hits inside a block and
    copies the cached state on write (partial hits), which livetail's hits on page
    boundaries never need and do not provide."""
    for g in groups:
        B = specs[g].block_size
        if caching and hash_block_size < B:
            raise unsupported(
                f'Mamba "align" mode with hashing finer than the Mamba block ({hash_block_size} '
                f"< {B}, group {g}: partial-hit copy-on-write)"
            )


def check_align_step(
    specs: Sequence[livetail.GroupSpec], groups: Sequence[int], extent: int, more: int
) -> None:
    """Refuse a step that starts inside a page and passes that page's end: the page would
    keep the state of the step before (vLLM writes a step's state only at its end) and be
    named as the state at its end. vLLM's scheduler never makes such a step without
    speculative tokens (refused): a prompt's chunks end on pages but for the last, and
    decode advances one token at a time."""
    for g in groups:
        B = specs[g].block_size
        tail = -extent % B
        if tail and more > tail:
            raise unsupported(
                f'Mamba "align" mode: a step of {more} tokens from inside a page (group {g})'
            )


def note_state_names(
    named: set[int],
    tables: Sequence[livetail.BlockTable],
    specs: Sequence[livetail.GroupSpec],
    groups: Sequence[int],
    lo_tokens: int,
    n: int,
) -> None:
    """Record the pages of the state groups' slots in [lo_tokens, n) that now carry a name:
    the real ones (holes take no name)."""
    for g in groups:
        B = specs[g].block_size
        pages = tables[g].page_ids()[lo_tokens // B : n // B].tolist()
        named.update(p for p in pages if p)


def state_named_now(
    match: livetail.PrefixMatch, groups: Sequence[int], named: set[int]
) -> bool:
    """Does the match resume a state group from a page named this step?"""
    for g in groups:
        pages = match.pages[g]
        if len(pages) and int(pages[-1]) in named:
            return True
    return False
