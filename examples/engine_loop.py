"""How an engine wires livetail: match -> charge -> claim -> acquire -> name -> reclaim -> free."""

import livetail

pool = livetail.BlockPool(4096)
coord = livetail.Coordinator(
    [
        livetail.GroupSpec("full", 64),  # full attention
        livetail.GroupSpec("sliding", 64, sliding_window=1024),  # sliding-window attention
        livetail.GroupSpec("sliding", 8, sliding_window=4, live_tail_alloc=True),  # conv state
    ],
    pool,
)


def serve(prompt: list[int], chunk: int = 2048, decode: int = 16) -> int:
    """Prefill `prompt` chunk by chunk, decode `decode` tokens; returns the prefix-hit tokens."""
    keys = livetail.page_keys(prompt, coord.base_block_size)
    # 1. match: read-only; keep the last prompt token to compute (its logits are needed).
    usable = (len(prompt) - 1) // coord.base_block_size
    match = coord.match_prefix(keys[:usable])
    # 2. charge: pages the claim takes + the first chunk and its decode reserve, sequentially.
    tables = coord.new_tables()
    first = min(chunk, len(prompt) - match.num_tokens)
    reserve = 1 if first == len(prompt) - match.num_tokens else 0
    charge = coord.blocks_consumed_by_claim(match) + coord.blocks_needed_for_sequential(
        tables, first, reserve
    )
    if charge > pool.num_free:
        raise RuntimeError("not admitted: wait for pages")
    # 3. claim the hit, 4. acquire and compute chunks, naming pages before reclaiming them.
    coord.claim(tables, match)
    done = match.num_tokens
    while done < len(prompt):
        n = min(chunk, len(prompt) - done)
        assert coord.acquire(tables, n)
        done += n
        page_ids = [t.page_ids() for t in tables]  # int32, holes = 0: hand to the kernels
        assert len(page_ids) == coord.num_groups
        coord.cache_full_blocks(tables, keys, done)  # 5. name
        coord.reclaim_expired(tables, done)  # 6. reclaim what slid out of every window
    for _ in range(decode):
        assert coord.acquire(tables, 1)
        done += 1
        coord.reclaim_expired(tables, done)
    coord.free(tables)  # 7. free: named pages stay matchable until evicted
    return match.num_tokens


system = list(range(5000))
print("first request hit", serve(system + [1, 2, 3]), "tokens")
print("second request hit", serve(system + [4, 5, 6, 7]), "tokens")
print("free pages", pool.num_free, "of", pool.num_blocks - 1, "cached", pool.num_cached)
