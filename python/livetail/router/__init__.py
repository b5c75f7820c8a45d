"""A cluster router's prefix index for hybrid models, fed only by KV event batches.

``PrefixIndex`` keeps, for many engines, the names each engine's pools hold, learned from
the event batches the engines publish (vLLM's KV-event encoding, ``livetail.events``), and
answers for a prompt, per engine, the ``num_tokens`` that engine's
``coordinator.match_prefix(keys)`` would return (semantics sections 8 and 10):

- a boundary ``T`` is a multiple of the lcm of the engine's block sizes, at most
  ``len(keys) * base``, and counts only if every group supports it: a full group needs a
  name on every slot below ``b = T / B``, a sliding group the slots ``[max(0, b - R), b)``
  with ``R = ceil((W - 1) / B)`` (``W = 1``: no slot at all), a state group the slot
  ``b - 1``;
- a slot is present if its name is on the device (``"GPU"``) or the host (``"CPU"``) tier;
- the answer is the greatest supported boundary; sliding and state support is not
  monotone in ``T``, so every boundary is looked at, not only up to the first miss.

Names are indexed by the low 64 bits of the block hash, the form of vLLM's default integer
``ExternalBlockHash``; 32-byte hashes (``int_block_hashes=False``) are reduced to the same
64 bits, so both forms index alike and match the keys of ``livetail.page_keys``.

The index is numpy arrays: an open-addressing hash table of 64-bit hashes to rows, and a
presence matrix (row, engine group) of tier bits. The two hot loops, probing the table and
searching one engine's greatest boundary, run in the native module (``livetail._core``,
native/src/router.cpp) when it imports, else in numpy (the same answers; tests compare them).

Modules: ``_index`` (``PrefixIndex``), ``_decode`` (event batches -> per-key arrays),
``_layout`` (group layouts, tiers, an engine's record), ``_hashes`` (64-bit hashes of keys
and block hashes), ``_native`` and ``_numpy`` (the two hot loops, native and numpy).
"""

from ._hashes import key_hashes
from ._index import PrefixIndex, SequenceGap
from ._layout import GROUP_KINDS

__all__ = ["GROUP_KINDS", "PrefixIndex", "SequenceGap", "key_hashes"]
