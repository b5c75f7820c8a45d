"""Stage 1 check: vLLM's scheduler tests on vLLM's KV-cache manager and on livetail.vllm.

    python scripts/vllm_stage1.py BASELINE.xml ADAPTER.xml [--markdown] [--list]

Reads the two junit files scripts/vllm_env.sh writes (each test carries the properties
``kv_groups`` and ``unsupported`` of livetail.vllm_pytest) and fails (exit 1) unless:

1. every test that passed on vLLM's manager, built only managers of one full-attention
   group, and met no feature livetail.vllm refuses, passes on the adapter;
2. every test that fails on the adapter fails through livetail.vllm's named
   ``NotImplementedError``, or failed on vLLM's manager too, with the same exception type.

It prints a table per feature: passed / failed on vLLM's manager beside passed / failed /
unsupported on the adapter (README: "Under vLLM's scheduler"); --list adds every test.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass

NIE = "livetail.vllm does not support"
ONE_FULL_GROUP = "FullAttentionSpec"

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


def one_full_group(kv_groups: str) -> bool:
    return all(layout == ONE_FULL_GROUP for layout in kv_groups.split("|") if layout)


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
    problems: list[str] = []
    required = 0
    listing: list[str] = []
    for key in sorted(base, key=lambda k: (k[0], k[1])):
        b, a = base[key], adapt[key]
        feature = feature_of(key[0], key[1])
        row = rows.setdefault(feature, [0, 0, 0, 0, 0, 0])
        row[0] += 1
        row[1 if b.passed else 2] += 1
        refused = NIE in a.message
        if a.passed:
            row[3] += 1
            verdict = "passed"
        elif refused:
            row[5] += 1
            verdict = "unsupported: " + a.message.split(NIE, 1)[1].strip()
        else:
            row[4] += 1
            verdict = "failed: " + a.message
        must_pass = b.passed and one_full_group(b.kv_groups) and not a.unsupported
        required += must_pass
        name = f"{key[0].rsplit('.', 1)[-1]}::{key[1]}"
        if must_pass and not a.passed:
            problems.append(f"{name}: passes on vLLM's manager, fails on the adapter: {a.message}")
        elif (
            not a.passed
            and not refused
            and (b.passed or exception_type(a.message) != exception_type(b.message))
        ):
            problems.append(f"{name}: fails on the adapter, not through {NIE!r}: {a.message}")
        listing.append(
            f"{feature:34} {name:100} vllm={'passed' if b.passed else 'failed'} "
            f"adapter={verdict} groups={b.kv_groups or '-'}"
        )

    header = (
        "feature",
        "tests",
        "vLLM passed",
        "vLLM failed",
        "livetail passed",
        "livetail failed",
        "livetail unsupported",
    )
    order = [f for f, _ in FEATURES] + [OTHER]
    table = [(f, *rows[f]) for f in order if f in rows]
    total = tuple(sum(r[i] for r in table) for i in range(1, 7))
    table.append(("total", *total))
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" + "---:|" * (len(header) - 1))
        for r in table:
            print("| " + " | ".join(str(x) for x in r) + " |")
    else:
        print(f"{header[0]:34}" + "".join(f"{h:>22}" for h in header[1:]))
        for r in table:
            print(f"{r[0]:34}" + "".join(f"{x:>22}" for x in r[1:]))
    print(
        f"\n{required} tests pass on vLLM's manager with one full-attention group and no "
        "refused feature: each must pass on the adapter."
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
