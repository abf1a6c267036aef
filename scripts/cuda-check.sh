#!/usr/bin/env bash
# The CUDA path, checked on a machine with an NVIDIA GPU (not part of .ci/run).
#
# 1. Installs NVIDIA's CUDA compiler, runtime headers, cuBLAS and cuRAND from PyPI into
#    .cache/cuda-venv (once; `pip` by package name), and builds `swactor` with the `cuda`
#    feature into target/cuda, printing how long the build took. Linking needs the NVIDIA
#    driver's libcuda, which only a machine with the driver has: elsewhere (or with
#    --check-only) the script runs `cargo check --features cuda` instead, which compiles
#    candle's CUDA kernels with nvcc and type-checks every line behind the feature.
# 2. With a GPU (nvidia-smi answers): split == whole on CUDA (the synthesized F32 model's
#    64 greedy tokens through 1, 2, 3 and 4 in-process stages must be the same ids, and are
#    compared with candle's CPU reference), then decode tokens/s of SmolLM2 on cuda:0 beside
#    the CPU engine (one run each, same file, same prompt).
#
# Usage: scripts/cuda-check.sh [--build-only | --check-only] [--compute-cap NN]
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=0
check_only=0
cap="${CUDA_COMPUTE_CAP:-}"
while [ $# -gt 0 ]; do
    case "$1" in
    --build-only) build_only=1 ;;
    --check-only) check_only=1 ;;
    --compute-cap) cap="$2"; shift ;;
    *) echo "usage: $0 [--build-only | --check-only] [--compute-cap NN]" >&2; exit 2 ;;
    esac
    shift
done

have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    have_gpu=1
    if [ -z "$cap" ]; then
        cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
    fi
fi
cap="${cap:-90}"

venv=.cache/cuda-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# CUDA 13's compiler wheel carries nvcc itself (the 12.x wheels carry only ptxas).
"$venv/bin/pip" install -q "nvidia-cuda-nvcc==13.0.88" "nvidia-cuda-runtime==13.0.96" \
    "nvidia-cublas==13.1.0.3" "nvidia-curand==10.4.0.35" "nvidia-cuda-crt==13.0.88" \
    "nvidia-cuda-nvrtc==13.0.88" "nvidia-cuda-cccl==13.0.85" "nvidia-nvvm==13.0.88"
root=$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13"))')
# The wheels ship versioned libraries only: the linker wants `libX.so` names, and the
# driver's libcuda comes from the system.
links="$venv/links"
mkdir -p "$links"
for lib in "$root"/lib/lib*.so.*; do
    ln -sf "$lib" "$links/$(basename "$lib" | sed 's/\.so\..*/.so/')"
done
driver=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')
[ -n "$driver" ] && ln -sf "$driver" "$links/libcuda.so"
export PATH="$root/bin:$PATH"
export CUDA_ROOT="$root" CUDA_PATH="$root" CUDA_TOOLKIT_ROOT_DIR="$root"
export CPATH="$root/include${CPATH:+:$CPATH}"
export LIBRARY_PATH="$links${LIBRARY_PATH:+:$LIBRARY_PATH}"
export LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUDA_COMPUTE_CAP="$cap"
nvcc --version | tail -1

start=$(date +%s)
if [ "$check_only" = 1 ] || [ -z "$driver" ]; then
    [ -z "$driver" ] && echo "no NVIDIA driver (libcuda) here: checking, not linking"
    CARGO_TARGET_DIR=target/cuda cargo check --release --features cuda --all-targets
    echo "cuda check: $(( $(date +%s) - start )) s (compute capability $cap)"
    exit 0
fi
CARGO_TARGET_DIR=target/cuda cargo build --release --features cuda
echo "cuda build: $(( $(date +%s) - start )) s (compute capability $cap)"
bin=target/cuda/release/swactor

if [ "$build_only" = 1 ] || [ "$have_gpu" = 0 ]; then
    [ "$have_gpu" = 0 ] && echo "no GPU here: stopping after the build"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" model synth --out "$tmp/synth.gguf" --blocks 6 --dtype f32 >/dev/null
ids() { # model device stages
    "$bin" generate --model "$1" --device "$2" --stages "$3" --max-tokens 64 \
        --prompt "Once upon a time" --json 2>/dev/null |
        python3 -c 'import json,sys; print(" ".join(str(v["id"]) for v in map(json.loads, sys.stdin) if v.get("type") == "token"))'
}
whole=$(ids "$tmp/synth.gguf" cuda:0 1)
[ -n "$whole" ] || { echo "FAIL: no tokens on cuda:0"; exit 1; }
for stages in 2 3 4; do
    split=$(ids "$tmp/synth.gguf" cuda:0 "$stages")
    if [ "$split" = "$whole" ]; then
        echo "split == whole on cuda:0: $stages stages give the 1-stage ids"
    else
        echo "FAIL: $stages stages on cuda:0 differ from one stage"; exit 1
    fi
done
if [ "$(ids "$tmp/synth.gguf" candle 1)" = "$whole" ]; then
    echo "cuda:0 gives candle's CPU ids on the F32 model"
else
    echo "note: cuda:0's greedy ids differ from candle's CPU ids (float order differs)"
fi

model=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || .ci/fetch-models
rate() { # device
    "$bin" generate --model "$model" --device "$1" --max-tokens 64 \
        --prompt "Once upon a time there was a little girl named Lily." --json 2>/dev/null |
        python3 -c 'import json,sys; print([v for v in map(json.loads, sys.stdin) if v.get("type") == "generation"][0]["decode_tokens_per_s"])'
}
gpu=$(rate cuda:0)
cpu=$(rate cpu)
python3 -c "g, c = $gpu, $cpu; print(f'SmolLM2 Q4_1 decode tok/s: cuda:0 {g:.1f}, cpu engine {c:.1f}, ratio {g / c:.2f}')"
