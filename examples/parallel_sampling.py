"""Parallel sampling with forks (semantics 13.6): one prompt computed once, its pages shared by
n samples; each sample copies the partly written tail page before it decodes into it."""

import livetail

pool = livetail.BlockPool(600)
coord = livetail.Coordinator(
    [
        livetail.GroupSpec("full", 16),  # full attention
        livetail.GroupSpec("sliding", 16, sliding_window=128),  # sliding-window attention
        livetail.GroupSpec("sliding", 8, sliding_window=4, live_tail_alloc=True),  # conv state
    ],
    pool,
)
PROMPT, SAMPLES, DECODE = 1000, 4, 40  # 1000 tokens: the last page of each group is partial

prompt = coord.new_tables()
assert coord.acquire(prompt, PROMPT)
coord.reclaim_expired(prompt, PROMPT)  # the prompt's forward is done
print("prompt pages", pool.num_pinned)

samples = [prompt]
for _ in range(SAMPLES - 1):
    tables, tail_slots = coord.fork(prompt)
    samples.append(tables)
print("after forks", "pinned", pool.num_pinned, "tail slots", tail_slots)

copies = 0
for tables in samples:
    # Before a sample writes past the shared extent it takes its own copy of every shared
    # tail page (the engine copies each (group, shared page, new page) on the device).
    todo = coord.copy_tail(tables)
    assert todo is not None, "the pool is short of pages for the tail copies"
    copies += len(todo)
print("tail copies", copies, "pinned", pool.num_pinned)

for step in range(DECODE):
    for tables in samples:
        assert coord.acquire(tables, 1)
        coord.reclaim_expired(tables, PROMPT + step + 1)
print("after decode", "pinned", pool.num_pinned, "per group", coord.stats()["pinned_pages"])

for tables in samples:
    coord.free(tables)
print("free pages", pool.num_free, "of", pool.num_blocks - 1)
