"""The type stubs of livetail._core (issue 12 item 5): what type-checks and what does not.

Runs mypy --strict on small programs against the installed stub.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BAD = """\
import livetail

v: int = livetail.__version__
m = livetail.PrefixMatch()
g = livetail.Manager()
o = livetail.OffloadPlan()
d = livetail.DetachedTables()
h: livetail.BlockPool = livetail.HostPool(8)


class Pool(livetail.BlockPool):
    pass


class Window(livetail.SlidingWindowManager):
    pass


class Spec(livetail.GroupSpec):
    pass
"""

GOOD = """\
import livetail

version: str = livetail.__version__
pool = livetail.BlockPool(64)
coord = livetail.Coordinator([livetail.GroupSpec("full", 8)], pool)
match: livetail.PrefixMatch = coord.match_prefix([])
managers: list[livetail.Manager] = coord.managers
host = livetail.HostPool(16, events=True)
tiered = livetail.Coordinator([livetail.GroupSpec("full", 8)], livetail.BlockPool(64), host)
offload: livetail.OffloadPlan | None = tiered.plan_offload(tiered.new_tables(), 0)
load: livetail.LoadPlan | None = tiered.claim(tiered.new_tables(), tiered.match_prefix([]))
if load is not None:
    tiered.complete_load(load)
same: livetail.HostPool | None = tiered.host
name: tuple[int, bytes] | None = pool.name(1)
reset: bool = pool.reset_names() and host.reset_names()
dropped: int = pool.evict_names([1, 2]) + host.evict_names(())
handle: livetail.DetachedTables = coord.detach(coord.new_tables())
back: int = coord.release_detached(handle) + handle.num_pages
done: bool = handle.released
named: int = coord.cache_full_blocks(coord.new_tables(), [], 0, token_ids=[1, 2])
"""


def _mypy(tmp_path: Path, source: str) -> list[str]:
    path = tmp_path / "program.py"
    path.write_text(source)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(path),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    return [line.split(": ", 1)[1] for line in out.stdout.splitlines() if ": error: " in line]


def test_stub_rejects_subclasses_of_final_classes_and_constructing_a_match(
    tmp_path: Path,
) -> None:
    assert _mypy(tmp_path, BAD) == [
        'error: Incompatible types in assignment (expression has type "str", variable has '
        'type "int")  [assignment]',
        'error: Too few arguments for "PrefixMatch"  [call-arg]',
        'error: Too few arguments for "Manager"  [call-arg]',
        'error: Too few arguments for "OffloadPlan"  [call-arg]',
        'error: Too few arguments for "DetachedTables"  [call-arg]',
        'error: Incompatible types in assignment (expression has type "HostPool", variable '
        'has type "BlockPool")  [assignment]',
        'error: Cannot inherit from final class "BlockPool"  [misc]',
        'error: Cannot inherit from final class "SlidingWindowManager"  [misc]',
        'error: Cannot inherit from final class "GroupSpec"  [misc]',
    ]


def test_stub_accepts_the_public_api(tmp_path: Path) -> None:
    assert _mypy(tmp_path, GOOD) == []
