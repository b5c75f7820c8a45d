"""Usage errors of ``livetail verify``, ``livetail theorems`` and ``livetail replay`` found
before any work: a ``--traces`` path that is a file, a ``--docs`` folder that is not the
project's root, a trace whose op is invalid on every side (exit 2, never 1, which is kept
for a reproduced bug)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from livetail.verify import cli, replay
from livetail.verify.theorems.tables import DOC_BLOCKS

FAST = "live-tail-minimal"
ROOT = Path(__file__).resolve().parents[1]


def _no_run(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a theorem ran although the command is a usage error")


@pytest.mark.parametrize("where", ["file", "under-a-file"])
def test_verify_traces_path_that_is_a_file_is_a_usage_error_before_any_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    from livetail.verify import runner

    monkeypatch.setattr(runner, "run_theorems", _no_run)
    blocker = tmp_path / "a-file"
    blocker.write_text("kept")
    traces = blocker if where == "file" else blocker / "traces"
    report = tmp_path / "report.json"
    code = cli.main(
        ["verify", "--quick", "--only", FAST, "--report", str(report), "--traces", str(traces)]
    )
    assert code == cli.EXIT_USAGE
    err = " ".join(capsys.readouterr().err.split())
    assert f"livetail verify: cannot write traces to {traces}:" in err
    assert "is a file, not a folder" in err
    assert blocker.read_text() == "kept" and not report.exists()


def test_verify_traces_folder_to_be_made_is_accepted() -> None:
    assert cli._not_a_folder(Path("/nonexistent-root-xyz/a/b")) == ""


@pytest.mark.parametrize("docs", ["missing", "empty", "a-file"])
def test_theorems_docs_that_is_not_the_project_root_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docs: str
) -> None:
    d = tmp_path / docs
    if docs == "empty":
        d.mkdir()
    elif docs == "a-file":
        d.write_text("")
    for check in ([], ["--check"]):
        assert cli.main(["theorems", "--docs", str(d), *check]) == cli.EXIT_USAGE
        err = " ".join(capsys.readouterr().err.split())
        assert err.startswith(f"livetail theorems: --docs {d}: not the project's root:")
        assert "README.md, docs/theorems.md not found there" in err


def test_theorems_docs_without_markers_is_a_usage_error_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for rel in DOC_BLOCKS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    # A README whose generated table lost its end marker: nothing is rewritten.
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace("<!-- theorem-table:end -->", ""))
    theorems = (tmp_path / "docs/theorems.md").read_text()
    assert cli.main(["theorems", "--docs", str(tmp_path)]) == cli.EXIT_USAGE
    err = " ".join(capsys.readouterr().err.split())
    assert "expected one <!-- theorem-table:start --> and one <!-- theorem-table:end -->" in err
    assert (tmp_path / "docs/theorems.md").read_text() == theorems


def _trace(ops: list[dict[str, Any]], groups: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "format": "livetail-trace",
        "version": 1,
        "title": "an op no implementation accepts",
        "origin": "manual",
        "variant": None,
        "geometry": {
            "groups": groups or [{"kind": "full", "block_size": 4}],
            "num_blocks": 8,
            "num_requests": 1,
        },
        "observed": None,
        "ops": ops,
    }


@pytest.mark.parametrize("impl", ["both", "spec"])
@pytest.mark.parametrize(
    ("ops", "step", "why"),
    [
        (
            [{"op": "reclaim", "request": 0, "frontier": 5}],
            0,
            "frontier 5 is past the extent 0 of request 0's tables",
        ),
        (
            [
                {"op": "acquire", "request": 0, "tokens": 6},
                {"op": "group_reclaim", "request": 0, "group": 0, "frontier": 7},
            ],
            1,
            "frontier 7 is past the extent 6 of request 0's group 0 table",
        ),
    ],
)
def test_replay_of_an_op_invalid_on_every_side_is_an_invalid_trace_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    impl: str,
    ops: list[dict[str, Any]],
    step: int,
    why: str,
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace(ops)))
    assert replay.main([str(path), "--impl", impl, "--quiet"]) == replay.EXIT_USAGE
    cap = capsys.readouterr()
    assert "REPRODUCED" not in cap.out
    assert cap.err.strip().splitlines()[-1] == (
        f"livetail replay: invalid trace {path}: ops[{step}] {ops[step]['op']} is not a "
        f"valid call: {why}"
    )
    # Through the console script too.
    assert cli.main(["replay", str(path), "--impl", impl, "--quiet"]) == cli.EXIT_USAGE


def test_replay_of_a_valid_reclaim_still_passes(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    ops = [
        {"op": "acquire", "request": 0, "tokens": 6},
        {"op": "reclaim", "request": 0, "frontier": 6},
    ]
    path.write_text(json.dumps(_trace(ops)))
    assert replay.main([str(path), "--quiet"]) == replay.EXIT_OK
