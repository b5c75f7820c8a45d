#!/usr/bin/env python3
"""vLLM 0.33's own KVCacheManager and livetail's adapter, side by side, step by step.

Both managers are driven through the same request streams by one scheduler-shaped loop that
calls them the way vLLM 0.33's ``Scheduler.schedule`` / ``update_from_output`` do
(benchmarks/side_by_side_driver.py lists the calls). Per step it records the admitted
requests and their prefix-hit tokens, the preempted and running requests, and the pages
pinned per group during the forward and after the reclaim. Two runs agree when every step's
record is equal.

Layouts: ``full_swa`` (full attention B=16 + sliding window W=128 B=16) and ``dsv4``, the
DeepSeek-V4 layout of vLLM issue #54703: MLA B=256 (full), two sliding-window groups B=64
W=128, the ratio-4 compressor state B=4 W=8 and the ratio-128 compressor state B=8 W=128
(vLLM 0.33 specs the compressor states as ``SlidingWindowMLASpec`` with those windows,
``models/deepseek_v4/compressor.py``). vLLM's manager runs the MLA specs
(``MLAAttentionSpec``, ``SlidingWindowMLASpec`` for the four others); the adapter runs the
plain ``FullAttentionSpec`` / ``SlidingWindowSpec`` with the same page sizes and windows (it
rejects MLA specs by name), and the harness checks that vLLM's manager gives the same trace
on both spec flavours.

Live tail (the second table): the adapter gives the compressor groups live-tail allocation.
Valid only for compressor kernels that read the chunk being compressed from activations,
never from its pages (README, "When live tail is safe"); vLLM's manager is unchanged.

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

from side_by_side_driver import (
    LAYOUTS,
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
        mla = layout == "dsv4"
        for stream in streams(layout, ci):
            max_len = max(len(r.prompt) + r.max_tokens for r in stream.requests) + 1
            for nb in pool_sizes(layout, ci):
                args = (layout, nb, stream, max_len)

                def vllm_run(mla: bool = mla, rules: Sequence[str] = (), args: Any = args) -> Run:
                    m = make_manager("vllm", *args, mla=mla, rules=rules)
                    return run_stream(m, args[2], args[0], "vLLM")

                v = vllm_run()
                if mla and differences(v, vllm_run(mla=False)):
                    raise SystemExit(
                        f"{layout}: vLLM's manager differs between MLA and plain specs"
                    )
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


def admission_charges(layout: str, pool: int, ci: bool) -> list[tuple[str, int, int]]:
    """(request, vLLM's charge, livetail's charge) per whole-prompt admission check.

    vLLM's manager (with livetail's rules, so both see the same states) charges
    ``get_num_blocks_to_allocate(..., apply_admission_cap=True)``, a sliding group at most
    ceil((W - 1 + C) / B) + 1 pages; the adapter charges ``_charge(..., whole_prompt=True)``
    (semantics 13.1), which counts the pages a prefix hit claims as held to the end.
    """
    stream = streams(layout, ci)[0]
    max_len = max(len(r.prompt) + r.max_tokens for r in stream.requests) + 1
    out: dict[str, list[tuple[str, int]]] = {"vllm": [], "livetail": []}
    current = [""]  # the request whose whole-prompt check is running
    for impl in out:
        m = make_manager(impl, layout, pool, stream, max_len, rules=RULES if impl == "vllm" else ())
        seen = out[impl]
        allocate = m.allocate_slots

        def allocate_slots(req: Any, *a: Any, _allocate: Any = allocate, **k: Any) -> Any:
            current[0] = req.request_id if k.get("full_sequence_must_fit") else ""
            return _allocate(req, *a, **k)

        m.allocate_slots = allocate_slots
        if impl == "vllm":
            co = m.coordinator
            count = co.get_num_blocks_to_allocate

            def vllm_count(*a: Any, _count: Any = count, _seen: Any = seen, **k: Any) -> int:
                n = int(_count(*a, **k))
                if k.get("apply_admission_cap"):
                    _seen.append((current[0], n))
                return n

            co.get_num_blocks_to_allocate = vllm_count
        else:
            charge = m._charge

            def lt_charge(*a: Any, _charge: Any = charge, _seen: Any = seen, **k: Any) -> int:
                n = int(_charge(*a, **k))
                if k.get("whole_prompt"):
                    _seen.append((current[0], n))
                return n

            m._charge = lt_charge
        run_stream(m, stream, layout, impl)
    if [r for r, _ in out["vllm"]] != [r for r, _ in out["livetail"]]:
        raise SystemExit(f"{layout} / pool {pool}: the admission checks differ in order")
    return [(r, x, y) for (r, x), (_, y) in zip(out["vllm"], out["livetail"])]


def live_tail_case(stream: Stream, pool: int) -> tuple[str, int, Run, Run]:
    """vLLM's manager (MLA specs) and the adapter with live tail on the compressor groups."""
    layout = "dsv4"
    max_len = max(len(r.prompt) + r.max_tokens for r in stream.requests) + 1
    v = run_stream(
        make_manager("vllm", layout, pool, stream, max_len, mla=True), stream, layout, ""
    )
    lt = make_manager("livetail", layout, pool, stream, max_len, live_tail=True)
    return stream.name, pool, v, run_stream(lt, stream, layout, "")


def live_tail_rows(ci: bool) -> list[tuple[str, int, Run, Run]]:
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


def print_live_tail(rows: Sequence[tuple[str, int, Run, Run]], out: Callable[[str], None]) -> None:
    out(
        "| stream | pool | steps to drain (vLLM / adapter, live tail) | most running "
        "| peak pages | preempted | finished |"
    )
    out("|---|---:|---|---|---|---|---|")
    for name, nb, v, lt in rows:
        out(
            f"| {name} | {nb} | {v.steps_text()} / {lt.steps_text()} "
            f"| {v.max_running} / {lt.max_running} | "
            f"{v.peak_pages} / {lt.peak_pages} | {v.preemptions} / {lt.preemptions} | "
            f"{v.finished}/{v.total_requests} / {lt.finished}/{lt.total_requests} |"
        )


def plot(rows: Sequence[tuple[str, int, Run, Run]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(4 * len(rows), 3.2), squeeze=False)
    for ax, (name, nb, v, lt) in zip(axes[0], rows):
        ax.plot([s.pinned_total_forward for s in v.steps], label=f"vLLM ({v.steps_text()})", lw=1)
        ax.plot(
            [s.pinned_total_forward for s in lt.steps],
            label=f"livetail, live tail ({lt.steps_text()})",
            lw=1,
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
    args = ap.parse_args(argv)
    rows = agreement_rows(args.ci)
    print("## Live tail off: vLLM's manager and the adapter, step by step\n")
    print_agreement(rows, print)
    for a in rows:
        for t, fld, x, y in a.diffs[: args.diffs]:
            print(
                f"  {a.layout} / {a.stream} / pool {a.pool}: step {t} {fld}: vLLM {x} adapter {y}"
            )
    print("\nWhole-prompt admission checks (first stream; adapter's charge minus vLLM's):")
    for layout in LAYOUTS:
        for nb in pool_sizes(layout, args.ci):
            charges = admission_charges(layout, nb, args.ci)
            d = [(r, y - x) for r, x, y in charges if x != y]
            extra = f", by {min(e for _, e in d)} to {max(e for _, e in d)} pages" if d else ""
            reqs = sorted({r for r, _ in d}, key=lambda r: int(r[1:]))
            print(
                f"  {layout} / pool {nb}: {len(d)} of {len(charges)} differ{extra}"
                + (f" (requests {' '.join(reqs)})" if d else "")
            )
    lrows = live_tail_rows(args.ci)
    print("\n## Live tail on for the compressor groups (DeepSeek-V4 layout)\n")
    print_live_tail(lrows, print)
    if args.plot:
        plot(lrows, args.plot)
        print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
