"""The inventory of native hot-path arithmetic stays honest.

``native-hot-paths-fit-int64`` proves the sites listed in ``verify/theorems/sites/``;
these tests fail when the source and that list drift apart: a site whose text is no longer
in its function, an arithmetic operator in a hot-path function that no site covers (and
that is not inside a geometry.h call), a geometry.h call without a spec/geometry.py twin,
or docs/theorems.md missing a row of the inventory.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from livetail.spec import geometry as spec_geometry
from livetail.verify.theorems import hot_paths
from livetail.verify.theorems.hot_paths import SITES

ROOT = Path(__file__).resolve().parent.parent

# --- a small scanner of the native sources ------------------------------------------------

# Type names before a '*' or '&' make it a declarator, not an operator.
_TYPE = re.compile(r"(?:\b[A-Z]\w*|\b\w+_t|\bconst|\bauto|\bchar|\bvoid|\bint)\s*$")
_OPS = re.compile(r"\+\+|--|[-+*/%]=|[-+*/%]")


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", text)


def _find(text: str, name: str) -> str | None:
    for m in re.finditer(rf"(?<![\w:.>]){re.escape(name)}\s*\(", text):
        i, depth = m.end() - 1, 0
        while True:  # skip the parameter list
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        j = i
        while j < len(text) and text[j] not in "{;":
            j += 1
        if j == len(text) or text[j] == ";" or ":" in text[i:j].replace("::", ""):
            continue  # a declaration, or a call
        depth, k = 0, j
        while True:
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                return text[j:k]
    return None


def body(path: str, qualname: str) -> str:
    """Function `qualname`'s body (braces included) in native file `path`, without comments.

    ``Class::name`` is looked up as written, or else inside the body of class ``Class``.
    """
    text = _strip_comments((ROOT / path).read_text())
    found = _find(text, qualname)
    if found is None and "::" in qualname:
        cls, name = qualname.rsplit("::", 1)
        m = re.search(rf"class\s+(?:\w+::)*{re.escape(cls)}\b[^;{{]*\{{", text)
        if m:
            found = _find(text[m.end() - 1 :], name)
    if found is None:
        raise LookupError(f"{qualname} not defined in {path}")
    return found


def code_lines(text: str) -> list[str]:
    """Statements of a body, one per line, without comments and string literals."""
    out = []
    for line in text.splitlines():
        line = re.sub(r'"(?:[^"\\]|\\.)*"', '""', line.split("//")[0]).strip()
        # Failure messages: string building is not arithmetic.
        line = re.sub(r"std::to_string\((?:[^()]|\([^()]*\))*\)|\w+\.what\(\)", '""', line)
        if line:
            out.append(" ".join(line.split()))
    return out


def operators(line: str) -> list[str]:
    """Arithmetic operators in a line of C++ (bitwise ones and declarators excluded)."""
    line = line.replace("->", " . ")
    found = []
    for m in _OPS.finditer(line):
        op = m.group()
        before = line[: m.start()]
        if op in ("*", "&") and _TYPE.search(before):
            continue  # `int32_t* s`, `const Manager* m`
        if op == "*" and before.rstrip().endswith((",", "(", "=", "return")):
            continue  # a dereference
        if op == "-" and re.search(r"[(,=<>?:]\s*$|return\s*$|^\s*$", before):
            continue  # a negative literal
        if op == "+" and (before.rstrip().endswith('""') or line[m.end() :].lstrip()[:2] == '""'):
            continue  # a message being built
        found.append(op)
    return found


# --- the hot paths -------------------------------------------------------------------------

MANAGERS_H = "native/include/livetail/managers.h"
MANAGERS = "native/src/managers.cpp"
COORD = "native/src/coordinator.cpp"
POOL = "native/include/livetail/pool.h"
TABLE = "native/include/livetail/table.h"

# Every function on the acquire / reclaim / free / decode / prefix paths.
HOT = {
    MANAGERS_H: [
        "check_fits",
        "check_frontier",
        "needed_unchecked",
        "reserve_unchecked",
        "acquire_unchecked",
        "reclaim_unchecked",
        "Manager::acquire",
        "Manager::blocks_needed_for",
        "Manager::blocks_needed_for_sequential",
        "Manager::reclaim_expired",
        "Manager::free",
    ],
    TABLE: ["extent"],
    MANAGERS: [
        "Manager::acquire_checked",
        "Manager::append_slots",
        "Manager::punch_band",
        "Manager::free_unchecked",
        "Manager::blocks_reclaimable_at",
    ],
    COORD: [
        "Coordinator::acquire",
        "Coordinator::blocks_needed_for",
        "Coordinator::blocks_needed_for_sequential",
        "Coordinator::reclaim_expired",
        "Coordinator::free",
        "Coordinator::decode_step",
        "Coordinator::resume",
        "Coordinator::cache_full_blocks",
        "Coordinator::match_prefix",
        "Coordinator::blocks_consumed_by_claim",
        "Coordinator::claim",
    ],
    POOL: [
        "Taker::pop",
        "Taker::done",
        "Releaser::release",
        "Releaser::done",
        "BlockPool::take",
        "BlockPool::release",
        "take_shared",
    ],
}
HOT_FUNCTIONS = [(f, fn) for f, fns in HOT.items() for fn in fns]


def _norm(text: str) -> str:
    return " ".join(text.split())


def _geometry_calls(text: str) -> set[str]:
    return set(re.findall(r"geometry::(\w+)\s*\(", text))


@pytest.mark.parametrize("site", SITES, ids=lambda s: f"{s.function}:{s.code}")
def test_site_text_is_verbatim_in_its_hot_path_function(site: object) -> None:
    assert (site.file, site.function) in HOT_FUNCTIONS  # type: ignore[attr-defined]
    assert _norm(site.code) in _norm(body(site.file, site.function))  # type: ignore[attr-defined]


@pytest.mark.parametrize("path,function", HOT_FUNCTIONS)
def test_every_arithmetic_operator_of_a_hot_path_is_a_proved_site(path: str, function: str) -> None:
    codes = sorted(
        (_norm(s.code) for s in SITES if s.file == path and s.function == function),
        key=len,
        reverse=True,
    )
    uncovered = []
    for line in code_lines(body(path, function)):
        rest = line
        for code in codes:
            rest = rest.replace(code, " ")
        if operators(rest):
            uncovered.append(line)
    assert uncovered == []


def test_operator_scan_sees_arithmetic_and_skips_declarators_and_messages() -> None:
    assert operators("const int64_t hi = p0 + m;") == ["+"]
    assert operators("for (; i < b; ++i)") == ["++"]
    assert operators("need += x * 2 / y % z - 1;") == ["+=", "*", "/", "%", "-"]
    assert operators("int32_t* s = t.slots_.data();") == []
    assert operators("BlockTable* const* ts = f(*tables[i], -1);") == []
    assert operators('fail("x", "" + "" + "");') == []
    assert code_lines('fail("n", "= " + std::to_string(a + b));') == ['fail("", "" + "");']


def test_scan_finds_functions_defined_in_a_class_body_or_out_of_line() -> None:
    assert "++taken_" in body(POOL, "Taker::pop")
    assert "num_free_ += released_" in body(POOL, "Releaser::done")
    assert "num_free_ -= taken_" in body(POOL, "Taker::done")
    assert "geometry::first_live_slot" in body(MANAGERS, "Manager::append_slots")


def test_geometry_calls_on_hot_paths_have_a_spec_twin_the_theorem_evaluates() -> None:
    called = set().union(*(_geometry_calls(body(f, fn)) for f, fn in HOT_FUNCTIONS))
    header = (ROOT / "native/include/livetail/geometry.h").read_text()
    defined = set(re.findall(r"LIVETAIL_INLINE \w+ (\w+)\(", header))
    arith_ops = {"div", "mod", "min", "max"}
    assert called - arith_ops <= defined
    # Every geometry.h function is a twin of a spec function of the same name.
    assert {f for f in defined - arith_ops if not hasattr(spec_geometry, f)} == set()
    # The hot-path theorem runs every routed function it names.
    routed = {"slots_after", "frontier_after", "first_live_slot", "period_start"}
    routed |= {"next_period", "resume_run_begin", "resume_run_end"}
    assert routed <= called
    source = Path(hot_paths.__file__).read_text()
    assert all(f"geo.{f}(" in source for f in routed)


def test_docs_list_every_site_of_the_inventory() -> None:
    text = _norm((ROOT / "docs" / "theorems.md").read_text())
    assert _norm(hot_paths.inventory_markdown()) in text


@pytest.mark.parametrize("call,where", hot_paths.ROUTED)
def test_routed_call_is_verbatim_in_its_function(call: str, where: str) -> None:
    short, function = where.split(" ")
    path = next(f for f in HOT if f.endswith("/" + short))
    assert _norm(call) in _norm(body(path, function))


def test_every_geometry_call_on_a_hot_path_is_evaluated_by_a_range_theorem() -> None:
    called = set().union(*(_geometry_calls(body(f, fn)) for f, fn in HOT_FUNCTIONS))
    arith_source = (Path(hot_paths.__file__).parent / "prover" / "obligations.py").read_text()
    closed = {c.removeprefix("geometry::") for c, _ in hot_paths.CLOSED_FORMS}
    routed = {re.match(r"geometry::(\w+)", c).group(1) for c, _ in hot_paths.ROUTED}  # type: ignore[union-attr]
    routed |= {"period", "kept_per_period"}  # the loop's period and kept count
    assert called - {"div", "mod", "min", "max"} == closed | routed
    assert all(f"geo.{f}(" in arith_source for f in closed)
    source = Path(hot_paths.__file__).read_text()
    assert all(f"geo.{f}(" in source for f in routed)
