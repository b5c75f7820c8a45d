#!/usr/bin/env python3
"""vLLM 0.33's own KVCacheManager and livetail's adapter, side by side, step by step.

Both managers are driven through the same request streams by one scheduler-shaped loop that
calls them the way vLLM 0.33's ``Scheduler.schedule`` / ``update_from_output`` do
(benchmarks/side_by_side_driver.py lists the calls). Per step it records the admitted
requests and their prefix-hit tokens, the preempted and running requests, and the pages
pinned per group during the forward and after the reclaim. Two runs agree when every step's
record is equal.

Layouts: ``full_swa`` (full attention B=16 + sliding window W=128 B=16) and ``dsv4``,
DeepSeek-V4 as vLLM 0.33 builds it (vLLM issue #54703; ``side_by_side_driver.dsv4_specs``):
``MLAAttentionSpec`` B=256 and four ``SlidingWindowMLASpec`` groups, the attention layers'
sliding-window cache B=64 W=128 twice, the ratio-4 compressor state B=4 W=8 and the
ratio-128 compressor state B=8 W=128, with the model's sizes. Both managers run those specs.
The managers are configured as vLLM 0.33 configures them by default: the whole-prompt
admission check on (``scheduler_reserve_full_isl``) and async scheduling, so two batches in
flight (``max_in_flight_tokens`` = 2 x the step budget; ``--batches 1`` for a synchronous
scheduler). The loop itself settles each step before the next.

Live tail (the second table): the adapter with live tail off and on the compressor groups.
Live tail is valid only for compressor kernels that read the chunk being compressed from
activations, never from its pages (README, "When live tail is safe"); none of vLLM 0.33's
does (every one reads the states ``_SAVE_PARTIAL_STATES_KERNEL`` wrote to the state cache),
so those figures are what such a kernel would get. vLLM's manager is unchanged.

    python benchmarks/vllm_side_by_side.py --ci     # CI size (tests/test_vllm_side_by_side.py)
    python benchmarks/vllm_side_by_side.py --plot docs/vllm_side_by_side.png   # the docs' tables
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import side_by_side_driver as driver
from side_by_side_driver import (
    LAYOUTS,
    MAX_CONCURRENT_BATCHES,
    RULES,
    ReqSpec,
    Run,
    Stream,
    make_manager,
    run_stream,
)

# ---- streams ---------------------------------------------------------------------------


def shared_prefix_stream(
    name: str,
    seed: int,
    n: int,
    prefix_len: int,
    num_prefixes: int,
    suffix: tuple[int, int],
    decode: tuple[int, int],
    every: int,
    batched: int,
    max_num_seqs: int = 64,
) -> Stream:
    """n requests, one every ``every`` steps, each a shared prefix plus its own suffix."""
    rng = random.Random(seed)
    prefixes = [
        tuple(rng.randrange(1, 50_000) for _ in range(prefix_len)) for _ in range(num_prefixes)
    ]
    reqs = []
    for i in range(n):
        prompt = prefixes[rng.randrange(num_prefixes)] + tuple(
            rng.randrange(1, 50_000) for _ in range(rng.randint(*suffix))
        )
        reqs.append(ReqSpec(f"r{i}", i * every, prompt, rng.randint(*decode)))
    return Stream(name, reqs, batched, max_num_seqs)


def long_prompt_stream() -> Stream:
    """vllm-ascend #15204: prompts of 32 850 / 51 976 / 63 778 tokens, 64 Ki-token steps."""
    rng = random.Random(15204)
    reqs = [
        ReqSpec(f"L{i}", 0, tuple(rng.randrange(1, 50_000) for _ in range(n)), 4)
        for i, n in enumerate((32_850, 51_976, 63_778))
    ]
    return Stream("long prompts (#15204)", reqs, 65_536, 16)


def streams(layout: str, ci: bool) -> list[Stream]:
    if layout == "full_swa":
        if ci:
            return [
                shared_prefix_stream("shared prefix", 1, 12, 256, 2, (16, 400), (4, 24), 1, 512)
            ]
        return [
            shared_prefix_stream("shared prefix", 1, 64, 1024, 3, (16, 2048), (16, 128), 2, 2048),
            shared_prefix_stream("short chat", 2, 96, 128, 4, (8, 256), (32, 256), 1, 1024),
        ]
    if ci:
        return [shared_prefix_stream("shared prefix", 3, 8, 1024, 2, (64, 1500), (4, 16), 2, 2048)]
    return [shared_prefix_stream("shared prefix", 3, 32, 4096, 3, (256, 8192), (16, 64), 2, 8192)]


def pool_sizes(layout: str, ci: bool) -> list[int]:
    if layout == "full_swa":
        return [120, 400] if ci else [300, 400, 1000, 4000]
    return [900, 3000] if ci else [4000, 6000, 20000]


# ---- comparison ------------------------------------------------------------------------


def differences(a: Run, b: Run) -> list[tuple[int, str, Any, Any]]:
    """Every (step, field, a's value, b's value) where the two runs' records differ."""
    out = []
    names = (
        "admitted",
        "preempted",
        "running",
        "pinned per group",
        "pinned",
        "pinned after reclaim",
    )
    for t in range(max(len(a.steps), len(b.steps))):
        ka = a.steps[t].key() if t < len(a.steps) else None
        kb = b.steps[t].key() if t < len(b.steps) else None
        if ka == kb:
            continue
        if ka is None or kb is None:
            out.append((t, "step exists", ka is not None, kb is not None))
            continue
        for name, x, y in zip(names, ka, kb):
            if x != y:
                out.append((t, name, x, y))
    return out


@dataclass
class Agreement:
    layout: str
    stream: str
    pool: int
    vllm: Run
    adapter: Run
    diffs: list[tuple[int, str, Any, Any]]  # vLLM's manager against the adapter
    diffs_rules: list[tuple[int, str, Any, Any]]  # vLLM with livetail's rules (RULES)


def agreement_rows(ci: bool) -> list[Agreement]:
    rows = []
    for layout in LAYOUTS:
        for stream in streams(layout, ci):
            max_len = max(len(r.prompt) + r.max_tokens for r in stream.requests) + 1
            for nb in pool_sizes(layout, ci):
                args = (layout, nb, stream, max_len)

                def vllm_run(rules: Sequence[str] = (), args: Any = args) -> Run:
                    m = make_manager("vllm", *args, rules=rules)
                    return run_stream(m, args[2], args[0], "vLLM")

                v = vllm_run()
                lt = run_stream(
                    make_manager("livetail", layout, nb, stream, max_len),
                    stream,
                    layout,
                    "livetail",
                )
                rows.append(
                    Agreement(
                        layout,
                        stream.name,
                        nb,
                        v,
                        lt,
                        differences(v, lt),
                        differences(vllm_run(rules=RULES), lt),
                    )
                )
    return rows


def print_agreement(rows: Sequence[Agreement], out: Callable[[str], None]) -> None:
    out(
        "| layout | stream | pool | steps (vLLM / adapter) | preempted | hit tokens | peak pages "
        "| steps that differ | with livetail's rules |"
    )
    out("|---|---|---:|---|---|---|---|---:|---:|")
    for a in rows:
        v, lt = a.vllm, a.adapter
        out(
            f"| {a.layout} | {a.stream} | {a.pool} | {v.steps_text()} / {lt.steps_text()} | "
            f"{v.preemptions} / {lt.preemptions} | {v.hit_tokens} / {lt.hit_tokens} | "
            f"{v.peak_pages} / {lt.peak_pages} | {len(a.diffs)} | {len(a.diffs_rules)} |"
        )


def admission_charges(layout: str, pool: int, ci: bool) -> list[tuple[str, int, int, int]]:
    """(request, vLLM's whole-prompt charge, vLLM's first-chunk charge, livetail's charge) per
    whole-prompt admission check.

    vLLM's manager (with livetail's rules, so both see the same states) charges
    ``get_num_blocks_to_allocate(..., apply_admission_cap=True)``, a sliding group at most
    ceil((W - 1 + C) / B) + 1 pages less the blocks a prefix hit covers; the same
    ``allocate_slots`` call then charges the first chunk (``apply_admission_cap=False``), so
    it admits only when both fit. The adapter charges ``_charge(..., whole_prompt=True)``:
    semantics 13.1, counted before the claim of a hit (blocks_needed_for_prompt_after_claim),
    which bounds its first chunk too.
    """
    stream = streams(layout, ci)[0]
    max_len = max(len(r.prompt) + r.max_tokens for r in stream.requests) + 1
    out: dict[str, list[tuple[str, int, int]]] = {"vllm": [], "livetail": []}
    current: list[Any] = ["", 0]  # the request whose whole-prompt check runs, its chunk
    for impl in out:
        m = make_manager(impl, layout, pool, stream, max_len, rules=RULES if impl == "vllm" else ())
        seen = out[impl]
        allocate = m.allocate_slots

        def allocate_slots(req: Any, n: int, *a: Any, _allocate: Any = allocate, **k: Any) -> Any:
            current[:] = [req.request_id if k.get("full_sequence_must_fit") else "", n]
            return _allocate(req, n, *a, **k)

        m.allocate_slots = allocate_slots
        if impl == "vllm":
            co = m.coordinator
            count = co.get_num_blocks_to_allocate

            def vllm_count(*a: Any, _count: Any = count, _seen: Any = seen, **k: Any) -> int:
                n = int(_count(*a, **k))
                if k.get("apply_admission_cap"):
                    # The first chunk's charge, as the call makes it once this check passes.
                    end = k["total_computed_tokens"] + current[1]
                    first = {
                        **k,
                        "num_tokens": min(end, max_len),
                        "num_tokens_main_model": end,
                        "apply_admission_cap": False,
                    }
                    _seen.append((current[0], n, int(_count(*a, **first))))
                return n

            co.get_num_blocks_to_allocate = vllm_count
        else:
            charge = m._charge

            def lt_charge(*a: Any, _charge: Any = charge, _seen: Any = seen, **k: Any) -> int:
                n = int(_charge(*a, **k))
                if k.get("whole_prompt"):
                    _seen.append((current[0], n, n))
                return n

            m._charge = lt_charge
        run_stream(m, stream, layout, impl)
    if [r[0] for r in out["vllm"]] != [r[0] for r in out["livetail"]]:
        raise SystemExit(f"{layout} / pool {pool}: the admission checks differ in order")
    return [(r, x, c, y) for (r, x, c), (_, y, _) in zip(out["vllm"], out["livetail"])]


@dataclass
class LiveTailRow:
    """One DeepSeek-V4 stream and pool: vLLM's manager, the adapter with live tail off, and
    the adapter with live tail on the compressor-state groups."""

    stream: str
    pool: int
    vllm: Run
    off: Run
    on: Run


def charge_summary(charges: Sequence[tuple[str, int, int, int]]) -> str:
    """How many checks the adapter charges above and below vLLM's whole-prompt charge, and
    above and below what vLLM's call requires to admit (both of its checks)."""

    def compare(pairs: list[tuple[int, int]]) -> str:
        above = [y - x for x, y in pairs if y > x]
        below = [x - y for x, y in pairs if y < x]
        out = f"{len(above)} above"
        if above:
            out += f" (by {min(above)} to {max(above)} pages)"
        out += f", {len(below)} below"
        if below:
            out += f" (by {min(below)} to {max(below)} pages)"
        return out

    whole = compare([(x, y) for _, x, _, y in charges])
    both = compare([(max(x, c), y) for _, x, c, y in charges])
    return f"{len(charges)} checks; against vLLM's charge: {whole}; against its two checks: {both}"


def live_tail_case(stream: Stream, pool: int) -> LiveTailRow:
    layout = "dsv4"
    max_len = max(len(r.prompt) + r.max_tokens for r in stream.requests) + 1

    def run(impl: str, live_tail: bool = False) -> Run:
        m = make_manager(impl, layout, pool, stream, max_len, live_tail=live_tail)
        return run_stream(m, stream, layout, "")

    return LiveTailRow(stream.name, pool, run("vllm"), run("livetail"), run("livetail", True))


def live_tail_rows(ci: bool) -> list[LiveTailRow]:
    cases: list[tuple[Stream, list[int]]] = [
        (long_prompt_stream(), [6959] if ci else [6959, 12000])
    ]
    if ci:
        stream = shared_prefix_stream(
            "shared prefix, 8 Ki steps", 5, 6, 1024, 2, (2048, 6000), (4, 8), 1, 8192
        )
        cases.append((stream, [900]))
    else:
        cases.append((streams("dsv4", False)[0], [1500, 3000, 6000]))
    return [live_tail_case(stream, nb) for stream, pools in cases for nb in pools]


def print_live_tail(rows: Sequence[LiveTailRow], out: Callable[[str], None]) -> None:
    out(
        "| stream | pool | manager | steps to drain | finished | preempted | hit tokens "
        "| most running | peak pages |"
    )
    out("|---|---:|---|---|---|---:|---:|---:|---:|")
    for row in rows:
        for label, r in (
            ("vLLM 0.33", row.vllm),
            ("adapter, live tail off", row.off),
            ("adapter, live tail on (activation-read kernel)", row.on),
        ):
            out(
                f"| {row.stream} | {row.pool} | {label} | {r.steps_text()} "
                f"| {r.finished}/{r.total_requests} | {r.preemptions} | {r.hit_tokens} "
                f"| {r.max_running} | {r.peak_pages} |"
            )


def plot(rows: Sequence[LiveTailRow], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(4 * len(rows), 3.2), squeeze=False)
    for ax, row in zip(axes[0], rows):
        name, nb = row.stream, row.pool
        for label, r in (
            ("vLLM", row.vllm),
            ("livetail", row.off),
            ("livetail, live tail", row.on),
        ):
            ax.plot(
                [s.pinned_total_forward for s in r.steps], label=f"{label} ({r.steps_text()})", lw=1
            )
        ax.axhline(nb - 1, color="grey", lw=0.5, ls="--")
        ax.set_title(f"{name}, pool {nb}", fontsize=8)
        ax.set_xlabel("step", fontsize=8)
        ax.set_ylabel("pinned pages", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ci", action="store_true", help="small and deterministic (the test's size)")
    ap.add_argument("--plot", metavar="PNG", help="pinned pages over steps, live tail runs")
    ap.add_argument("--diffs", type=int, default=5, help="differing steps to print per run")
    ap.add_argument(
        "--batches",
        type=int,
        default=MAX_CONCURRENT_BATCHES,
        help="concurrent batches (max_in_flight_tokens = batches * step budget): 2 with "
        "vLLM's default async scheduling, 1 without",
    )
    args = ap.parse_args(argv)
    driver.MAX_CONCURRENT_BATCHES = args.batches
    rows = agreement_rows(args.ci)
    print("## Live tail off: vLLM's manager and the adapter, step by step\n")
    print_agreement(rows, print)
    for a in rows:
        for t, fld, x, y in a.diffs[: args.diffs]:
            print(
                f"  {a.layout} / {a.stream} / pool {a.pool}: step {t} {fld}: vLLM {x} adapter {y}"
            )
    print("\nWhole-prompt admission checks (first stream; the adapter's charge against vLLM's):")
    for layout in LAYOUTS:
        for nb in pool_sizes(layout, args.ci):
            charges = admission_charges(layout, nb, args.ci)
            print(f"  {layout} / pool {nb}: {charge_summary(charges)}")
    lrows = live_tail_rows(args.ci)
    print("\n## Live tail on for the compressor groups (DeepSeek-V4 layout)\n")
    print_live_tail(lrows, print)
    if args.plot:
        plot(lrows, args.plot)
        print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
