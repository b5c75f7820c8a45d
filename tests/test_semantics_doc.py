"""docs/semantics.md, the reference semantics, is in the repository and every citation of it
resolves: each "section N", "section N.M", "sections N and M", "semantics N" and "section 7
item N" / "property N" in README.md and docs/*.md names a heading of docs/semantics.md, and
every link to it (and from it, to docs/decisions.md) lands on a heading that exists.

Also: the README's summary of what `livetail verify` establishes agrees with its generated
theorem table, and the figures and the closed form docs/semantics.md states hold.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SEMANTICS = ROOT / "docs" / "semantics.md"
README = ROOT / "README.md"
CITING = [README, *sorted((ROOT / "docs").glob("*.md"))]

NUMBER = r"\d+(?:\.\d+)?"
# "section 8", "sections 3-5", "sections 6 and 8", "section 5 and 7.5", "Section 12", ...
SECTIONS = re.compile(rf"\b[Ss]ections?\s+({NUMBER}(?:\s*(?:-|and|to)\s*{NUMBER})*)(?![\w.]*\d)")
# "semantics 4/5" (a trace title), "semantics section 4" is caught above.
SEMANTICS_N = re.compile(rf"\bsemantics\s+({NUMBER}(?:/{NUMBER})*)")
# "section 7 item 12", "section 7, item 8", "property 8" (of section 7).
ITEM = re.compile(r"\bsection 7,? item (\d+)|\b[Pp]roperty (\d+)\b")


def headings() -> dict[str, str]:
    """Section numbers of docs/semantics.md: '7' for '## 7. ...', '7.5' for '### 7.5 ...'."""
    found: dict[str, str] = {}
    for line in SEMANTICS.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^(#{2,3}) (\d+(?:\.\d+)?)\.? (.+)$", line)
        if m:
            level, number, title = m.groups()
            assert (level == "##") == ("." not in number), line
            found[number] = title
    return found


def citations(text: str) -> list[str]:
    """Every section number `text` cites, in order (ranges expanded)."""
    out: list[str] = []
    for m in SECTIONS.finditer(text):
        parts = re.findall(rf"{NUMBER}|-|to", m.group(1))
        for i, p in enumerate(parts):
            if p in ("-", "to"):  # a range: 3-5, 13.1 to 13.3 (one major number)
                lo, hi = parts[i - 1].split("."), parts[i + 1].split(".")
                prefix = f"{lo[0]}." if len(lo) == 2 else ""
                out += [f"{prefix}{n}" for n in range(int(lo[-1]) + 1, int(hi[-1]))]
            else:
                out.append(p)
    for m in SEMANTICS_N.finditer(text):
        out += m.group(1).split("/")
    for m in ITEM.finditer(text):
        out.append(f"7.{m.group(1) or m.group(2)}")
    return out


def slug(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces -."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {
        slug(m.group(1))
        for m in re.finditer(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
    }


def test_semantics_has_sections_1_to_13_with_every_property_and_hybrid_item() -> None:
    h = headings()
    assert [n for n in h if "." not in n] == [str(n) for n in range(1, 14)]
    assert [n for n in h if n.startswith("7.")] == [f"7.{n}" for n in range(1, 13)]
    assert [n for n in h if n.startswith("13.")] == [f"13.{n}" for n in range(1, 10)]


def test_the_citation_parser_reads_every_form_the_docs_use() -> None:
    text = (
        "semantics section 5 and 7.5; sections 3-5; sections 6 and 8; Section 12: x; "
        "semantics 4/5: B=8; section 7 item 12; section 7, item 8; property 9; "
        "section Counters and events; sections 13.1 to 13.3"
    )
    assert citations(text) == [
        "5", "7.5", "3", "4", "5", "6", "8", "12", "7", "7", "13.1", "13.2", "13.3",
        "4", "5", "7.12", "7.8", "7.9",
    ]  # fmt: skip


@pytest.mark.parametrize("doc", CITING, ids=lambda p: p.name)
def test_every_section_citation_resolves_to_a_heading_of_semantics(doc: Path) -> None:
    known = headings()
    cited = citations(doc.read_text(encoding="utf-8"))
    unresolved = sorted({c for c in cited if c not in known})
    assert not unresolved, f"{doc.name} cites sections docs/semantics.md does not have"


def test_the_docs_cite_the_semantics_often_enough_to_need_it() -> None:
    # What the page exists for: the citations were there before it (about 50 lines).
    lines = [
        line
        for doc in CITING
        if doc != SEMANTICS
        for line in doc.read_text(encoding="utf-8").splitlines()
        if citations(line)
    ]
    assert len(lines) >= 50


LINK = re.compile(r"\]\(((?:docs/)?(?:semantics|decisions)\.md)(#[^)]*)?\)")


@pytest.mark.parametrize("doc", CITING, ids=lambda p: p.name)
def test_links_to_semantics_and_decisions_land_on_headings(doc: Path) -> None:
    for m in LINK.finditer(doc.read_text(encoding="utf-8")):
        target = (doc.parent / m.group(1)).resolve()
        assert target.is_file(), m.group(0)
        if m.group(2):
            assert m.group(2)[1:] in anchors(target), f"{doc.name}: {m.group(0)}"


def test_readme_points_to_the_semantics_where_it_cites_them() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.count("](docs/semantics.md)") >= 4
    assert "[docs/semantics.md](docs/semantics.md)" in text
    assert "[docs/cpp.md](docs/cpp.md)" in text
    # No citation of "the semantics" without a way to open them.
    for para in text.split("\n\n"):
        if re.search(r"\bsemantics section \d", para):
            raise AssertionError(f"an unlinked citation: {para[:120]}")


def _establishes() -> dict[int, set[str]]:
    """Property of section 7 -> the domains of the README table's theorems establishing it."""
    text = README.read_text(encoding="utf-8")
    table = text.split("<!-- theorem-table:start -->")[1].split("<!-- theorem-table:end -->")[0]
    out: dict[int, set[str]] = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        for p in re.findall(r"\b7\.(\d+)", cells[3]):
            out.setdefault(int(p), set()).add(cells[1])
    return out


def test_readme_summary_of_verify_matches_its_theorem_table() -> None:
    domains = _establishes()
    assert sorted(domains) == list(range(1, 13))
    # "1 to 7 unbounded"; "8 to 12 unbounded over the rules that carry them"; "8 to 11 also
    # bounded": each property has the theorems the README's sentence says it has.
    assert all("unbounded" in domains[p] for p in range(1, 13))
    assert all("bounded" in domains[p] for p in range(8, 12))
    assert domains[12] == {"unbounded"}
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "it checks properties 1 to 12 of the reference semantics" in text
    assert "`events-replay-to-the-names`" in text
    assert "checked by tests only" not in text


# --- what docs/semantics.md states, checked on the spec -----------------------------------


def _live(s: int, f: int, b: int, w: int, m: int) -> bool:
    r = -(-(w - 1) // b)
    slid = (f - w + 1) // b if f - w + 1 > 0 else 0
    return s >= slid or s % m >= m - r


def _g(x: int, m: int, r: int) -> int:
    return (x // m) * r + max(0, x % m - (m - r))


def test_section_4_closed_form_equals_the_slot_by_slot_count() -> None:
    for b in (1, 2, 3, 8):
        for w in range(1, 20):
            r = -(-(w - 1) // b)
            for m in range(1, 5):
                rr = min(r, m)
                for first in range(0, 9):
                    for new in range(1, 9):
                        for f in range((first + new - 1) * b + 1, (first + new) * b + 1):
                            slid = (f - w + 1) // b if f - w + 1 > 0 else 0
                            h = min(max(slid, first), first + new)
                            closed = (first + new - h) + _g(h, m, rr) - _g(first, m, rr)
                            walk = sum(_live(s, f, b, w, m) for s in range(first, first + new))
                            assert closed == walk, (b, w, m, first, new, f)


def test_section_4_and_6_reference_figures_on_the_spec() -> None:
    from livetail import spec

    pool, t = spec.BlockPool(1 << 12), spec.BlockTable()
    m = spec.SlidingWindowManager(8, 12, 256)
    assert (m.blocks_needed_for(t, 17), m.blocks_needed_for(t, 19)) == (3, 2)
    assert m.blocks_needed_for_sequential(t, 17, 2) == 3
    assert m.acquire(pool, t, 8192)
    real = [s for s, p in enumerate(t.page_ids()) if p]
    assert len(t) == 1024 and real == [s for s in range(1024) if s % 32 >= 30]
    assert real[-2:] == [1022, 1023]
    c = spec.Coordinator(
        [
            spec.GroupSpec("full", 256),
            spec.GroupSpec("sliding", 128, sliding_window=511),
            spec.GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True),
        ],
        spec.BlockPool(1 << 12),
    )
    tables = c.new_tables()
    assert c.acquire(tables, 8192)
    assert [x.num_real_pages for x in tables] == [32, 64, 64]
    assert len(tables[2]) == 1024
