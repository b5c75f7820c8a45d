"""Instruction counts of the hot operations (native/bench/hot.cpp) under callgrind: a
regression gate that machine load cannot fool, and side-by-side comparisons of builds.

    python benchmarks/instructions.py check [--baseline FILE]   # the CI gate
    python benchmarks/instructions.py update --reason "why"      # rewrite the baseline
    python benchmarks/instructions.py compare [REV ...] [--rounds N] [--markdown]

``check`` builds hot.cpp with the C++ core of this tree (g++ or $CXX, -O2 -DNDEBUG, as the
Release build), runs it once under ``valgrind --tool=callgrind``, and fails (exit 1) when an
operation's instructions per call exceed its count in benchmarks/instructions_baseline.json
by more than 10%, or when the baseline lacks an operation or a reason. Counts are exact for a
given binary (fixed inputs, callgrind's collection toggled around each measured loop), so
the same commit gives the same counts on an idle and on a loaded machine. A change that
makes an operation dearer on purpose updates the baseline in the same commit:
``update --reason`` rewrites the counts and records the reason beside every count that moved
by more than 1% (the gate refuses a baseline entry without a reason). Drops of more than 10%
are reported, so the baseline can be tightened.

``compare`` builds the same hot.cpp against older trees (``git archive REV native``; rows a
tree lacks the API for are left out), counts each build's instructions and times every
build's rows alternately, round by round (``--rounds``, the median of each build's rounds),
so that machine noise hits every build alike. Default revisions: the seed's first C++ core
(537b56d), main a week before this work (1fe3547), and this tree.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "benchmarks" / "instructions_baseline.json"
HOT = ROOT / "native" / "bench" / "hot.cpp"
THRESHOLD = 0.10  # growth over the baseline that fails the gate
DEFAULT_REVS = ["537b56d", "1fe3547", "HEAD"]
NAMES = {"537b56d": "seed (537b56d)", "1fe3547": "a week ago (1fe3547)"}


def compiler() -> str:
    return os.environ.get("CXX", "g++")


def compiler_id() -> str:
    out = subprocess.run([compiler(), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0].strip()


def build(tree: Path, out: Path, defines: tuple[str, ...] = ()) -> Path:
    """hot.cpp (always this tree's) linked with `tree`'s native/src, at the Release flags."""
    sources = sorted(str(p) for p in (tree / "native" / "src").glob("*.cpp"))
    cmd = [compiler(), "-O2", "-DNDEBUG", "-std=c++20", f"-I{tree / 'native' / 'include'}"]
    cmd += [f"-D{d}" for d in defines]
    cmd += [*sources, str(HOT), "-o", str(out)]
    subprocess.run(cmd, check=True)
    return out


def export(rev: str, dest: Path) -> Path:
    """`rev`'s native/ tree in dest (HEAD: this working tree as it is)."""
    if rev in ("HEAD", "."):
        return ROOT
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "native"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def count(binary: Path) -> dict[str, float]:
    """Instructions per call of each row: one callgrind run, one dump per row."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        run = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--collect-atstart=no",
                f"--callgrind-out-file={out}",
                str(binary),
                "count",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        iterations = {}
        for line in run.stdout.splitlines():
            name, n, _ = line.split()
            iterations[name] = int(n)
        counts: dict[str, float] = {}
        for dump in Path(tmp).glob("cg.out.*"):
            text = dump.read_text()
            name = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.M)
            total = re.search(r"^totals: (\d+)", text, re.M)
            if name and total:
                counts[name.group(1)] = int(total.group(1)) / iterations[name.group(1)]
    missing = set(iterations) - set(counts)
    if missing:
        raise SystemExit(f"callgrind gave no dump for {sorted(missing)}")
    return {k: round(counts[k], 1) for k in iterations}


def times(binary: Path, runs: int) -> dict[str, float]:
    out = subprocess.run([str(binary), "time", str(runs)], capture_output=True, text=True)
    out.check_returncode()
    return {line.split()[0]: float(line.split()[2]) for line in out.stdout.splitlines()}


# --- the gate ---------------------------------------------------------------------------------


def load_baseline(path: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(path.read_text())
    return data


def compare_to_baseline(counts: dict[str, float], baseline: dict[str, object]) -> list[str]:
    """The gate's failures (empty: pass); prints one line per operation."""
    ops = baseline["operations"]
    assert isinstance(ops, dict)
    failures = []
    if baseline.get("compiler") != compiler_id():
        print(
            f"note: baseline counted with {baseline.get('compiler')!r}, this is "
            f"{compiler_id()!r}; counts may differ by compiler"
        )
    for name, got in counts.items():
        entry = ops.get(name)
        if entry is None:
            failures.append(f"{name}: not in the baseline (run update --reason)")
            print(f"  {name:32s} {got:12.1f}  (no baseline)")
            continue
        base = float(entry["instructions"])
        if not str(entry.get("reason", "")).strip():
            failures.append(f"{name}: the baseline entry has no reason")
        ratio = got / base if base else float("inf")
        verdict = "ok"
        if ratio > 1 + THRESHOLD:
            verdict = "FAIL"
            failures.append(
                f"{name}: {got:.1f} instructions per call, {100 * (ratio - 1):+.1f}% over the "
                f"baseline's {base:.1f} (limit +{100 * THRESHOLD:.0f}%)"
            )
        elif ratio < 1 - THRESHOLD:
            verdict = "dropped: update the baseline to keep the gate tight"
        print(f"  {name:32s} {got:12.1f} {base:12.1f} {100 * (ratio - 1):+7.1f}%  {verdict}")
    for name in ops:
        if name not in counts:
            failures.append(f"{name}: in the baseline but no longer measured")
    return failures


def cmd_check(args: argparse.Namespace) -> int:
    baseline = load_baseline(Path(args.baseline))
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(ROOT, Path(tmp) / "hot", tuple(args.define))
        counts = count(binary)
    print(f"instructions per call (callgrind), this tree vs {args.baseline}:")
    print(f"  {'operation':32s} {'now':>12s} {'baseline':>12s} {'change':>8s}")
    failures = compare_to_baseline(counts, baseline)
    for f in failures:
        print(f"instruction gate: {f}", file=sys.stderr)
    if failures:
        print(
            "instruction gate failed: make the operation cheaper again, or, if the cost is "
            "meant, run `python benchmarks/instructions.py update --reason ...` and commit "
            "the baseline with the change",
            file=sys.stderr,
        )
        return 1
    print("instruction gate: every operation within +10% of its baseline")
    return 0


def cmd_update(args: argparse.Namespace) -> int:
    path = Path(args.baseline)
    old = load_baseline(path) if path.exists() else {"operations": {}}
    old_ops = old["operations"]
    assert isinstance(old_ops, dict)
    with tempfile.TemporaryDirectory() as tmp:
        counts = count(build(ROOT, Path(tmp) / "hot"))
    ops = {}
    for name, got in counts.items():
        prev = old_ops.get(name)
        moved = prev is None or abs(got / float(prev["instructions"]) - 1) > 0.01
        reason = args.reason if moved or not prev.get("reason") else prev["reason"]
        if not reason:
            raise SystemExit(f"{name} changed: give --reason")
        ops[name] = {"instructions": got, "reason": reason}
        if prev is not None:
            print(f"  {name:32s} {float(prev['instructions']):12.1f} -> {got:12.1f}")
        else:
            print(f"  {name:32s} {'new':>12s} -> {got:12.1f}")
    data = {
        "about": "instructions per call of native/bench/hot.cpp's rows under callgrind; "
        "benchmarks/instructions.py check fails past +10%",
        "compiler": compiler_id(),
        "flags": "-O2 -DNDEBUG -std=c++20",
        "operations": ops,
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


# --- side by side -------------------------------------------------------------------------


def cmd_compare(args: argparse.Namespace) -> int:
    revs = args.revs or DEFAULT_REVS
    with tempfile.TemporaryDirectory() as tmp:
        binaries = {}
        for i, rev in enumerate(revs):
            tree = export(rev, Path(tmp) / f"tree{i}")
            binaries[rev] = build(tree, Path(tmp) / f"hot{i}")
        counts = {rev: count(b) for rev, b in binaries.items()}
        runs: dict[str, dict[str, list[float]]] = {rev: {} for rev in revs}
        for _ in range(args.rounds):  # alternate builds round by round
            for rev, b in binaries.items():
                for name, ns in times(b, args.runs).items():
                    runs[rev].setdefault(name, []).append(ns)
    ns = {rev: {k: statistics.median(v) for k, v in r.items()} for rev, r in runs.items()}
    names = list(counts[revs[-1]])
    for rev in revs[:-1]:
        names += [n for n in counts[rev] if n not in names]
    heads = [NAMES.get(r, "this tree" if r == "HEAD" else r) for r in revs]
    if args.markdown:
        print("| operation | " + " | ".join(f"{h} ns / instr" for h in heads) + " |")
        print("|---|" + "---|" * len(revs))
    else:
        print(f"{'operation':32s} " + " ".join(f"{h:>26s}" for h in heads))
    for name in names:
        cells = []
        for rev in revs:
            if name in counts[rev]:
                cells.append(f"{ns[rev][name]:.1f} / {counts[rev][name]:.0f}")
            else:
                cells.append("n/a")
        if args.markdown:
            print(f"| `{name}` | " + " | ".join(cells) + " |")
        else:
            print(f"{name:32s} " + " ".join(f"{c:>26s}" for c in cells))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="the gate: fail past +10% of the baseline")
    c.add_argument("--baseline", default=str(BASELINE))
    c.add_argument("--define", action="append", default=[], help="a -D for hot.cpp's build")
    u = sub.add_parser("update", help="rewrite the baseline from this tree")
    u.add_argument("--baseline", default=str(BASELINE))
    u.add_argument("--reason", default="")
    s = sub.add_parser("compare", help="builds side by side: ns and instructions")
    s.add_argument("revs", nargs="*", help=f"git revisions (default {' '.join(DEFAULT_REVS)})")
    s.add_argument("--rounds", type=int, default=5, help="alternating rounds of timing")
    s.add_argument("--runs", type=int, default=11, help="runs per row per round")
    s.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    return {"check": cmd_check, "update": cmd_update, "compare": cmd_compare}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
