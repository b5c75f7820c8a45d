"""README's model-family coverage table is benchmarks/vllm_coverage.py's output (needs vLLM)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

pytest.importorskip("vllm")
pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN = "<!-- vllm-coverage:begin (benchmarks/vllm_coverage.py --markdown) -->"
END = "<!-- vllm-coverage:end -->"


def load_script():
    spec = importlib.util.spec_from_file_location(
        "vllm_coverage", ROOT / "benchmarks" / "vllm_coverage.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_coverage_table_is_the_scripts_output():
    readme = (ROOT / "README.md").read_text()
    assert readme.count(BEGIN) == 1 and readme.count(END) == 1
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    cov = load_script()
    assert block == cov.markdown(cov.table())


def test_coverage_cells_are_the_refusals_the_adapter_raises():
    cov = load_script()
    rows = {r[0]: r[2:] for r in cov.table()}
    assert rows["gpt-oss (20B, 120B)"] == (
        "accepted",
        "accepted",
        "accepted",
        rows["Llama 3 (8B, 70B)"][3],
    )
    assert rows["Llama 3 (8B, 70B)"][3].startswith("KV connectors")
    assert all(c.startswith("chunked local attention") for c in rows["Llama 4 (Scout, Maverick)"])
    assert rows["Qwen3-Next (80B-A3B)"][1] == "accepted"
    # Mamba "align" mode (semantics 13.5): accepted with prefix caching, refused by name
    # with speculative decoding.
    for family in ("Qwen3-Next (80B-A3B)", "Nemotron-H"):
        assert rows[family][0] == "accepted"
        assert rows[family][2] == 'Mamba "align" mode with speculative decoding'
        assert rows[family][3].startswith("KV connectors")
