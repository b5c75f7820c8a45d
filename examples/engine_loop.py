"""How an engine wires livetail for many requests: plan -> apply -> forward -> name -> reclaim
-> admit, with preemption when the pool runs short and prefix hits on re-admission."""

from dataclasses import dataclass, field

import livetail

pool = livetail.BlockPool(600)
coord = livetail.Coordinator(
    [
        livetail.GroupSpec("full", 64),  # full attention
        livetail.GroupSpec("sliding", 64, sliding_window=1024),  # sliding-window attention
        livetail.GroupSpec("sliding", 8, sliding_window=4, live_tail_alloc=True),  # conv state
    ],
    pool,
)
CHUNK, DECODE = 2048, 64


@dataclass
class Request:
    prompt: list[int]
    keys: list[bytes] = field(default_factory=list)
    tables: list[livetail.BlockTable] = field(default_factory=list)
    done: int = 0  # tokens computed
    generated: int = 0

    def ask(self) -> int:
        """Tokens this step: the next prefill chunk, or one decode token."""
        return min(CHUNK, len(self.prompt) - self.done) if self.done < len(self.prompt) else 1


system = list(range(5000))
waiting = [Request(system + [i] * (100 + 50 * i)) for i in range(8)]
for r in waiting:
    r.keys = livetail.page_keys(r.prompt, coord.base_block_size)
running: list[Request] = []  # priority order: oldest admission first
steps = preemptions = hit_tokens = 0
while waiting or running:
    steps += 1
    # 1. plan the whole step (read-only): the longest priority prefix that fits once the
    #    requests after it are preempted; top_fits is False only for a request that cannot
    #    fit even alone: reject it.
    plan = coord.plan_step([(r.tables, r.ask()) for r in running])
    assert plan.top_fits, "a request larger than the pool: reject it"
    # 2. apply: frees the preempted (lowest priority first), acquires for the stepped.
    coord.apply_step(plan)
    for r in running[plan.stepped :]:  # preempted: back to the waiting queue, from scratch
        preemptions += 1
        r.done, r.generated, r.tables = 0, 0, []
    waiting = running[plan.stepped :] + waiting
    stepped = running[: plan.stepped]
    # 3. admit against free_after: match, charge (claim + sequential first chunk and decode
    #    reserve), claim every hit before any admitted request acquires.
    budget, admitted = plan.free_after, []
    while waiting:
        r = waiting[0]
        usable = (len(r.prompt) - 1) // coord.base_block_size  # compute the last token
        match = coord.match_prefix(r.keys[:usable])
        tables = coord.new_tables()
        first = min(CHUNK, len(r.prompt) - match.num_tokens)
        reserve = 1 if first == len(r.prompt) - match.num_tokens else 0
        charge = coord.blocks_consumed_by_claim(match) + coord.blocks_needed_for_sequential(
            tables, first, reserve
        )
        if charge > budget:
            break
        budget -= charge
        coord.claim(tables, match)
        r.tables, r.done = tables, match.num_tokens
        hit_tokens += match.num_tokens
        admitted.append(waiting.pop(0))
    for r in admitted:
        assert coord.acquire(r.tables, r.ask())  # within its charge: cannot fail
    running = stepped + admitted
    # 4. forward: hand page ids (int32, holes = 0) to the kernels; then name, reclaim, finish.
    page_ids = livetail.page_ids_batch([t for r in running for t in r.tables])
    for r in running:
        n = r.ask()
        r.done += n
        if r.done <= len(r.prompt):
            coord.cache_full_blocks(r.tables, r.keys, r.done)  # name before reclaiming
        else:
            r.generated += 1
        coord.reclaim_expired(r.tables, r.done)
    for r in [r for r in running if r.generated == DECODE]:
        coord.free(r.tables)  # named pages stay matchable until evicted
        running.remove(r)

print("steps", steps, "preemptions", preemptions, "hit tokens", hit_tokens)
print("free pages", pool.num_free, "of", pool.num_blocks - 1, "cached", pool.num_cached)
