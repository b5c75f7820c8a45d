"""Stage 1 check: vLLM's scheduler tests on vLLM's KV-cache manager and on livetail.vllm.

    python scripts/vllm_stage1.py BASELINE.xml ADAPTER.xml [--markdown] [--list]

Reads the two junit files scripts/vllm_env.sh writes (each test carries the properties
``kv_groups`` and ``unsupported`` of livetail.vllm_pytest) and fails (exit 1) unless:

1. every test that passed on vLLM's manager passes on the adapter, or is refused by
   livetail.vllm's named ``NotImplementedError`` for one of the ``EXEMPT`` features (KV
   connectors, Mamba "align" mode, cross attention, bounded replay);
2. every refusal names one of those features;
3. every other test that fails on the adapter failed on vLLM's manager too, with the same
   exception type.

It prints a table per file and one per feature: passed / failed on vLLM's manager beside
passed / failed / refused on the adapter (README: "Under vLLM's scheduler"); --list adds
every test.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass

NIE = "livetail.vllm does not support"

# The features a refusal may name (the words of livetail.vllm's refusals): each needs the
# core or an engine path outside the adapter (README: "Under vLLM's scheduler"). Bounded
# replay (DeepSeek-V4.1's sliding-window group kept outside prefix caching) needs a group
# kind the core lacks: a group that takes no part in a match.
EXEMPT: dict[str, tuple[str, ...]] = {
    "KV connectors": ("KV connectors", "connector"),
    'Mamba "align" mode': (
        "Mamba cache mode 'align'",
        'Mamba "align" mode',
        "Mamba speculative or checkpoint blocks",
    ),
    "cross attention": ("cross attention", "encoder tokens"),
    "bounded replay": ("bounded replay",),
}

# (feature, words of a test's name), first match wins: the features livetail.vllm refuses
# come before the ones it implements, so a test of both counts under the refused one.
FEATURES: list[tuple[str, tuple[str, ...]]] = [
    (
        "hybrid / Mamba / sliding window",
        ("mamba", "hybrid", "swa", "sliding", "window", "qwen3_next"),
    ),
    ("encoder / multimodal", ("encoder", "mm_", "multimodal", "ec_connector", "embed")),
    (
        "KV connector / aux outputs",
        (
            "connector",
            "kv_transfer",
            "remote",
            "kv_load",
            "external",
            "nixl",
            "producer",
            "consumer",
            "handoff",
            "offload",
            "recv",
            "transfer",
            "auxiliary",
            "routed_experts",
            "delivery",
            "invalid_block",
        ),
    ),
    ("spec decode", ("spec", "eagle", "draft", "lookahead", "mtp", "ngram", "dflash", "dspark")),
    ("events", ("event",)),
    ("stats", ("stats", "metric")),
    ("prefix caching", ("prefix", "cache_hit", "cached", "reset")),
    ("preemption", ("preempt",)),
    ("full_sequence_must_fit", ("full_sequence", "must_fit", "reserve_full", "admission")),
    ("async scheduling", ("async",)),
]
OTHER = "other scheduling"


@dataclass
class Outcome:
    passed: bool
    message: str  # first line of the failure or error, "" when passed
    kv_groups: str
    unsupported: str


def feature_of(file: str, name: str) -> str:
    """A word with '_' matches anywhere in the name, any other the start of a name token."""
    low = name.lower()
    tokens = re.split(r"[_\[\]\-]", low)
    for feature, words in FEATURES:
        for w in words:
            if ("_" in w and w in low) or ("_" not in w and any(t.startswith(w) for t in tokens)):
                return feature
    return "async scheduling" if "async" in file else OTHER


def read(path: str) -> dict[tuple[str, str], Outcome]:
    out: dict[tuple[str, str], Outcome] = {}
    for case in ET.parse(path).iter("testcase"):
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if case.find("skipped") is not None:
            continue
        props = {p.get("name"): p.get("value") or "" for p in case.iter("property")}
        message = "" if bad is None else (bad.get("message") or "").strip().splitlines()[0:1]
        out[(case.get("classname") or "", case.get("name") or "")] = Outcome(
            passed=bad is None,
            message=message[0] if isinstance(message, list) and message else "",
            kv_groups=props.get("kv_groups", ""),
            unsupported=props.get("unsupported", ""),
        )
    return out


def exception_type(message: str) -> str:
    return message.split(":", 1)[0].strip()


def exempt(refusal: str) -> str | None:
    """The EXEMPT feature a refusal names, or None."""
    for feature, words in EXEMPT.items():
        if any(w in refusal for w in words):
            return feature
    return None


def print_table(header: tuple[str, ...], table: list[tuple], markdown: bool, width: int) -> None:
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" + "---:|" * (len(header) - 1))
        for r in table:
            print("| " + " | ".join(str(x) for x in r) + " |")
    else:
        print(f"{header[0]:{width}}" + "".join(f"{h:>17}" for h in header[1:]))
        for r in table:
            print(f"{r[0]:{width}}" + "".join(f"{x:>17}" for x in r[1:]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("baseline")
    ap.add_argument("adapter")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--list", action="store_true", help="list every test with its outcomes")
    args = ap.parse_args(argv)
    base = read(args.baseline)
    adapt = read(args.adapter)
    if set(base) != set(adapt):
        missing = sorted(set(base) ^ set(adapt))
        print(f"the two runs hold different tests, e.g. {missing[:3]}", file=sys.stderr)
        return 1

    rows: dict[str, list[int]] = {}
    files: dict[str, list[int]] = {}
    problems: list[str] = []
    required = 0
    listing: list[str] = []
    for key in sorted(base, key=lambda k: (k[0], k[1])):
        b, a = base[key], adapt[key]
        feature = feature_of(key[0], key[1])
        file = key[0].rsplit(".", 1)[-1] + ".py"
        for row in (rows.setdefault(feature, [0] * 6), files.setdefault(file, [0] * 6)):
            row[0] += 1
            row[1 if b.passed else 2] += 1
            row[3 if a.passed else 5 if NIE in a.message else 4] += 1
        refused = NIE in a.message
        refusal = a.message.split(NIE, 1)[1].strip() if refused else ""
        if a.passed:
            verdict = "passed"
        elif refused:
            verdict = "refused: " + refusal
        else:
            verdict = "failed: " + a.message
        name = f"{key[0].rsplit('.', 1)[-1]}::{key[1]}"
        required += b.passed
        if refused and exempt(refusal) is None:
            problems.append(f"{name}: refused for a feature outside {list(EXEMPT)}: {refusal}")
        elif b.passed and not a.passed and not refused:
            problems.append(f"{name}: passes on vLLM's manager, fails on the adapter: {a.message}")
        elif (
            not a.passed and not refused and exception_type(a.message) != exception_type(b.message)
        ):
            problems.append(f"{name}: fails on the adapter, not as on vLLM's: {a.message}")
        listing.append(
            f"{feature:34} {name:100} vllm={'passed' if b.passed else 'failed'} "
            f"adapter={verdict} groups={b.kv_groups or '-'}"
        )

    counts = (
        "tests",
        "vLLM passed",
        "vLLM failed",
        "livetail passed",
        "livetail failed",
        "livetail refused",
    )
    table = [(f, *files[f]) for f in files]
    table.append(("total", *(sum(r[i] for r in table) for i in range(1, 7))))
    print_table(("file", *counts), table, args.markdown, 36)
    print()
    order = [f for f, _ in FEATURES] + [OTHER]
    table = [(f, *rows[f]) for f in order if f in rows]
    print_table(("feature", *counts), table, args.markdown, 36)
    print(
        f"\n{required} tests pass on vLLM's manager: each must pass on the adapter or be "
        f"refused for one of {list(EXEMPT)}."
    )
    if args.list:
        print("\n" + "\n".join(listing))
    if problems:
        print(f"\nstage 1 FAILED ({len(problems)}):", *problems, sep="\n  ")
        return 1
    print("stage 1 passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
