#!/usr/bin/env bash
# vLLM 0.33.0's own scheduler-level tests (TESTS below: test_scheduler.py, test_async_scheduler.py
# and the other files of tests/v1/core and tests/v1/spec_decode that drive the scheduler on CPU)
# on vLLM's KV-cache manager (the baseline) and on livetail.vllm.KVCacheManager (the adapter),
# then scripts/vllm_stage1.py compares the two outcome files (README: "Under vLLM's scheduler").
#
#   scripts/vllm_env.sh DIR [build | configs | modelinfos | baseline | adapter | check | unit | all]
#   (default: all)
#
# DIR holds everything it makes, nothing of it is committed: venv/ (CPython 3.11, torch
# 2.13.0, vllm 0.33.0 without its dependencies, the pinned set the tests need, livetail from
# this checkout), cache/ (vLLM's 0.33.0 source distribution, of which only tests/ is used),
# hf/ (a Hugging Face cache of config.json files, and llava's special tokens), vllm-cache/
# (vLLM's model-info records, see model_infos), results/ (junit xml per run, logs).
# PYTHON overrides the interpreter (default: the newest CPython 3.11 of pyenv).
# "unit" runs livetail's own tests of livetail.vllm (tests/test_vllm_*.py) in that venv.
# "all" builds, runs the two runs of vLLM's tests side by side (one core each), the check,
# and the unit tests.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
[ $# -ge 1 ] || { echo "usage: $0 DIR [build|configs|modelinfos|baseline|adapter|check|unit|all]" >&2; exit 2; }
mkdir -p "$1"
dir="$(cd "$1" && pwd)"
what="${2:-all}"

VLLM_VERSION=0.33.0
TORCH_VERSION=2.13.0
TORCHVISION_VERSION=0.28.0  # the release built against torch 2.13.0
venv="$dir/venv"
cache="$dir/cache"
hf="$dir/hf"
results="$dir/results"
src="$cache/vllm-$VLLM_VERSION"
# vLLM's scheduler-level tests that run on CPU (scripts/vllm_stage1.py tabulates them per file).
TESTS=(
  tests/v1/core/test_scheduler.py
  tests/v1/core/test_async_scheduler.py
  tests/v1/core/test_deferred_block_free.py
  tests/v1/core/test_swa_inflight_window_free.py
  tests/v1/core/test_worker_slot_overflow.py
  tests/v1/core/test_priority_preemption_bug.py
  tests/v1/core/test_prefix_replay.py
  tests/v1/spec_decode/test_dynamic_sd.py
)

pick_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  ls -d "$HOME"/.pyenv/versions/3.11.*/bin/python 2>/dev/null | sort -V | tail -n 1
}

fetch_tests() {
  # The sdist's setup.py imports torch, setuptools_rust and setuptools_scm to report its
  # metadata, so pip reads it inside the venv (no build isolation); with no target device
  # and no version suffix the metadata says 0.33.0, as the file name does.
  [ -f "$src/tests/v1/core/test_scheduler.py" ] && return
  mkdir -p "$cache"
  "$venv/bin/python" -m pip install --quiet -r "$here/vllm_sdist_requirements.txt"
  VLLM_TARGET_DEVICE=empty VLLM_SKIP_VERSION_SUFFIX=1 "$venv/bin/python" -m pip download \
    --quiet --no-deps --no-binary :all: --no-build-isolation -d "$cache" "vllm==$VLLM_VERSION"
  tar -xzf "$cache/vllm-$VLLM_VERSION.tar.gz" -C "$cache" "vllm-$VLLM_VERSION/tests"
}

write_configs() {
  # config.json of the models the tests name, public architecture fields only.
  "$venv/bin/python" - "$hf" <<'PY'
import json, pathlib, sys
hub = pathlib.Path(sys.argv[1]) / "hub"
configs = {
    "facebook/opt-125m": {
        "architectures": ["OPTForCausalLM"], "model_type": "opt",
        "activation_dropout": 0.0, "activation_function": "relu", "attention_dropout": 0.0,
        "bos_token_id": 2, "do_layer_norm_before": True, "dropout": 0.1,
        "enable_bias": True, "eos_token_id": 2, "ffn_dim": 3072, "hidden_size": 768,
        "init_std": 0.02, "layer_norm_elementwise_affine": True, "layerdrop": 0.0,
        "max_position_embeddings": 2048, "num_attention_heads": 12,
        "num_hidden_layers": 12, "pad_token_id": 1, "prefix": "</s>",
        "torch_dtype": "float16", "use_cache": True, "vocab_size": 50272,
        "word_embed_proj_dim": 768,
    },
    "facebook/opt-350m": {
        "architectures": ["OPTForCausalLM"], "model_type": "opt",
        "activation_dropout": 0.0, "activation_function": "relu", "attention_dropout": 0.0,
        "bos_token_id": 2, "do_layer_norm_before": False, "dropout": 0.1,
        "enable_bias": True, "eos_token_id": 2, "ffn_dim": 4096, "hidden_size": 1024,
        "init_std": 0.02, "layer_norm_elementwise_affine": True, "layerdrop": 0.0,
        "max_position_embeddings": 2048, "num_attention_heads": 16,
        "num_hidden_layers": 24, "pad_token_id": 1, "prefix": "</s>",
        "torch_dtype": "float16", "use_cache": True, "vocab_size": 50272,
        "word_embed_proj_dim": 512,
    },
    "Qwen/Qwen3-0.6B": {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
        "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
        "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
        "max_position_embeddings": 40960, "max_window_layers": 28,
        "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
        "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
    },
}
# The two larger models' configs come from transformers' own config classes (its field
# names and defaults) with the models' public sizes.
from transformers import CLIPVisionConfig, LlamaConfig, LlavaConfig, Qwen3NextConfig

llava = LlavaConfig(
    vision_config=CLIPVisionConfig(
        hidden_size=1024, image_size=336, intermediate_size=4096, num_attention_heads=16,
        num_hidden_layers=24, patch_size=14, projection_dim=768,
    ).to_dict(),
    text_config=LlamaConfig(
        hidden_size=4096, intermediate_size=11008, num_attention_heads=32,
        num_hidden_layers=32, num_key_value_heads=32, vocab_size=32064,
        max_position_embeddings=4096, rms_norm_eps=1e-5,
    ).to_dict(),
    image_token_index=32000, vision_feature_layer=-2,
    vision_feature_select_strategy="default", projector_hidden_act="gelu",
).to_dict()
llava.update(architectures=["LlavaForConditionalGeneration"], torch_dtype="float16")
configs["llava-hf/llava-1.5-7b-hf"] = llava
qwen3_next = Qwen3NextConfig(
    hidden_size=2048, num_hidden_layers=48, num_attention_heads=16, num_key_value_heads=2,
    head_dim=256, vocab_size=151936, intermediate_size=5120, num_experts=512,
    num_experts_per_tok=10, moe_intermediate_size=512, shared_expert_intermediate_size=512,
    linear_num_value_heads=32, linear_num_key_heads=16, linear_key_head_dim=128,
    linear_value_head_dim=128, linear_conv_kernel_dim=4, full_attention_interval=4,
    max_position_embeddings=262144, rope_theta=10000000, partial_rotary_factor=0.25,
    decoder_sparse_step=1, norm_topk_prob=True,
).to_dict()
qwen3_next.update(architectures=["Qwen3NextForCausalLM"], torch_dtype="bfloat16")
configs["Qwen/Qwen3-Next-80B-A3B-Instruct"] = qwen3_next
revision = "0" * 40
for name, cfg in configs.items():
    repo = hub / ("models--" + name.replace("/", "--"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    (snapshot / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
# vLLM's StructuredOutputManager loads the model's tokenizer. transformers builds OPT's and
# Qwen3's without a vocabulary file; llava's (Llama's SentencePiece) needs one: a tokenizer
# with llava's special tokens at their ids and no other vocabulary (the tests pass token ids).
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

snapshot = hub / "models--llava-hf--llava-1.5-7b-hf" / "snapshots" / revision
special = {"<unk>": 0, "<s>": 1, "</s>": 2, "<image>": 32000}
Tokenizer(WordLevel(vocab=special, unk_token="<unk>")).save(str(snapshot / "tokenizer.json"))
(snapshot / "tokenizer_config.json").write_text(json.dumps({
    "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
    "unk_token": "<unk>", "pad_token": "<unk>", "model_max_length": 4096,
}) + "\n")
PY
}

model_infos() {
  # vLLM inspects a model's architecture (its model registry's _ModelInfo: class-level flags
  # such as supports_multimodal) by importing the model's module in a subprocess, and keeps
  # the result in VLLM_CACHE_ROOT/modelinfos keyed by the module file's hash. llava's module
  # imports transformers' pixtral image processor, which imports torchvision. torchvision's
  # x86-64 wheels on PyPI are CUDA builds: their C++ ops cannot load on the CPU torch here,
  # and the import then stops at the fake-kernel registrations of torchvision::nms and
  # ::qnms, which torchvision does not guard. So the record is written here, by vLLM's own
  # code, in a process that sees torchvision (kept out of the venv, in modelinfo-deps/, so
  # the tests' transformers never imports it) with those two operators' schemas declared and
  # no kernel (nothing calls them); the tests then read vLLM's record.
  "$venv/bin/python" -m pip install --quiet --no-deps --target "$dir/modelinfo-deps" \
    "torchvision==$TORCHVISION_VERSION"
  env VLLM_TARGET_DEVICE=cpu VLLM_CACHE_ROOT="$dir/vllm-cache" PYTHONPATH="$dir/modelinfo-deps" \
    "$venv/bin/python" - LlavaForConditionalGeneration Qwen3NextForCausalLM <<'PY'
import sys
from pathlib import Path

import torch

for op in ("nms", "qnms"):
    torch.library.define(
        f"torchvision::{op}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"
    )
from vllm.model_executor.models import registry

for arch in sys.argv[1:]:
    model = registry.ModelRegistry.models[arch]
    path = Path(registry.__file__).parent / (model.module_name.rsplit(".", 1)[-1] + ".py")
    info = registry._ModelInfo.from_model_cls(model.load_model_cls())
    module_hash = model._get_modelinfo_module_hash(path)
    model._save_modelinfo_to_cache(info, module_hash)
    assert model._load_modelinfo_from_cache(module_hash) is not None, arch  # the tests' read
    print(arch, "inspected:", model._get_cache_dir() / model._get_cache_filename())
PY
}

build() {
  local python
  python="$(pick_python)"
  [ -n "$python" ] || { echo "no CPython 3.11 found (set PYTHON)" >&2; exit 1; }
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet "torch==$TORCH_VERSION"
  "$venv/bin/python" -m pip install --quiet --no-deps "vllm==$VLLM_VERSION"
  "$venv/bin/python" -m pip install --quiet -r "$here/vllm_env_requirements.txt"
  "$venv/bin/python" -m pip install --quiet --no-deps mistral_common==1.13.1 \
    compressed-tensors==0.17.0
  fetch_tests
  write_configs
  model_infos
  # Its own build directory: the checkout's default (build/{wheel_tag}) may be in use.
  "$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps \
    -Cbuild-dir="$dir/livetail-build" "$repo"
  "$venv/bin/python" -c 'import torch, vllm, livetail.vllm; print("torch", torch.__version__, "vllm", vllm.__version__, "livetail", livetail.__version__)'
}

# run NAME SWAP: vLLM's tests with the plugin (SWAP=1: livetail's manager, 0: vLLM's).
run() {
  mkdir -p "$results"
  local start code=0
  start=$(date +%s)
  (cd "$src" && env VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 HF_HOME="$hf" \
    VLLM_CACHE_ROOT="$dir/vllm-cache" \
    LIVETAIL_VLLM_SWAP="$2" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    -p livetail.vllm_pytest -o junit_family=xunit1 --junitxml="$results/$1.xml" \
    "${TESTS[@]}") >"$results/$1.log" 2>&1 || code=$?
  echo "$1: $(tail -n 1 "$results/$1.log") ($(($(date +%s) - start)) s wall, pytest exit $code)"
}

unit() {
  (cd "$repo" && "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_vllm_*.py)
}

check() {
  "$venv/bin/python" "$here/vllm_stage1.py" "$results/baseline.xml" "$results/adapter.xml"
}

case "$what" in
  build) build ;;
  configs) write_configs ;;
  modelinfos) model_infos ;;
  baseline) run baseline 0 ;;
  adapter) run adapter 1 ;;
  check) check ;;
  unit) unit ;;
  all)
    build
    run baseline 0 &
    base_pid=$!
    run adapter 1
    wait "$base_pid"
    check
    unit
    ;;
  *) echo "unknown step: $what" >&2; exit 2 ;;
esac
