#!/usr/bin/env python3
"""swactor's CPU engine beside llama.cpp, on the same GGUF files, in one run.

Builds llama.cpp once (through llama-cpp-python, pinned, with the CMAKE_ARGS that avoid
the AMX instructions these VMs advertise but fault on) into .cache/llama-cpp-venv, writes
re-quantized copies of the model with `swactor model quantize` into .cache/bench-models,
then for every file and thread count measures, on both engines:

  - decode tokens/s: greedy, N tokens after the 12-token Lily prompt;
  - prefill tokens/s: one 128-token prompt (the Lily prompt repeated);

and prints them side by side with the ratio (ours / llama.cpp) and the targets (decode
>= 1.0, prefill >= 0.8), then swactor's aggregate decode at batch 1/4/8 and its stage
load time. First it checks correctness against the same peer: on a synthesized F32 model
(`swactor model synth`), the 64 greedy token ids of `swactor generate` must equal
llama.cpp's (exit 1 otherwise); the checks live in scripts/llama_cpp_parity.py: every
synthesized family equal id for id, Gemma 3 270M and SmolLM2 teacher-forced (only
near-ties may differ), tokenization of an awkward corpus on every pre-tokenizer. Gemma 3
270M gets its own rows in the table when .ci/fetch-models has fetched it. Not part of CI:
it compiles llama.cpp (6-10 minutes on 2 cores, once).

Usage: scripts/bench-llama-cpp.py [--model GGUF] [--types q8_0,q4_0,q4_k]
       [--threads 1,2] [--tokens 64] [--repeat 2] [--swactor target/release/swactor]
       [--parity-only]
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_cpp_parity  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
VENV = CACHE / "llama-cpp-venv"
LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"
CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON "
    "-DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF "
    "-DGGML_AMX_BF16=OFF"
)
PROMPT = "Once upon a time there was a little girl named Lily."


def venv_python() -> Path:
    py = VENV / "bin" / "python"
    probe = [str(py), "-c", "import llama_cpp"]
    if py.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return py
    print(f"building {LLAMA_CPP_PYTHON} into {VENV} (once; several minutes)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    env = dict(os.environ, CMAKE_ARGS=CMAKE_ARGS)
    subprocess.run([str(py), "-m", "pip", "install", "-q", LLAMA_CPP_PYTHON], check=True, env=env)
    return py


# Runs inside the venv: prints one JSON line per (file, threads).
LLAMA_SIDE = r"""
import json, sys, time
import llama_cpp
files, threads, tokens, repeat, prompt_tokens = json.loads(sys.argv[1])
for label, path in files:
    for t in threads:
        llm = llama_cpp.Llama(path, n_threads=t, n_threads_batch=t, n_ctx=512, seed=0,
                              verbose=False)
        lily = llm.tokenize(PROMPT.encode(), add_bos=True)
        body = llm.tokenize((" " + PROMPT).encode(), add_bos=False)
        long = list(lily)
        while len(long) < prompt_tokens:
            long += body
        long = long[:prompt_tokens]
        decode, prefill = 0.0, 0.0
        for _ in range(repeat):
            llm.reset()
            n, start = 0, None
            for tok in llm.generate(lily, top_k=1, temp=0.0, repeat_penalty=1.0):
                if start is None:
                    start = time.perf_counter()
                n += 1
                if n > tokens:
                    break
            decode = max(decode, tokens / (time.perf_counter() - start))
            llm.reset()
            t0 = time.perf_counter()
            llm.eval(long)
            prefill = max(prefill, len(long) / (time.perf_counter() - t0))
        print(json.dumps({"label": label, "threads": t, "decode_tokens_per_s": decode,
                          "prefill_tokens_per_s": prefill}), flush=True)
        del llm
""".replace("PROMPT", repr(PROMPT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(CACHE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--types", default="q8_0,q4_0,q4_k")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--swactor", default=str(ROOT / "target" / "release" / "swactor"))
    ap.add_argument("--parity-only", action="store_true", help="check, do not benchmark")
    args = ap.parse_args()
    swactor = args.swactor
    if not Path(swactor).exists():
        subprocess.run(["cargo", "build", "--release"], cwd=ROOT, check=True)

    models = CACHE / "bench-models"
    models.mkdir(parents=True, exist_ok=True)
    base = Path(args.model)
    files = [("shipped", str(base))]
    for q in [t for t in args.types.split(",") if t]:
        out = models / f"{base.stem}.{q}.gguf"
        if not out.exists():
            tmp = out.with_suffix(".tmp")
            subprocess.run([swactor, "model", "quantize", "--in", str(base), "--out", str(tmp),
                            "--dtype", q], check=True, stdout=subprocess.DEVNULL)
            tmp.rename(out)
        files.append((q, str(out)))
    threads = [int(t) for t in args.threads.split(",")]

    gemma = CACHE / "models" / "gemma-3-270m-q4_k_m.gguf"
    if gemma.exists() and gemma.resolve() != base.resolve():
        files.append(("gemma3", str(gemma)))

    py = venv_python()
    if not llama_cpp_parity.check_all(swactor, py, ROOT, args.tokens):
        return 1
    if args.parity_only:
        return 0
    ours, theirs = {}, {}
    # Interleaved, one file and thread count at a time, so that both engines see the
    # same machine (absolute rates drift between minutes on shared hosts).
    for label, path in files:
        for t in threads:
            cmd = [swactor, "bench", "engine", "--json", "--model", path, "--threads", str(t),
                   "--tokens", str(args.tokens), "--prompt-tokens", str(args.prompt_tokens),
                   "--repeat", str(args.repeat)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            for line in out.splitlines():
                v = json.loads(line)
                if v.get("type") == "bench_engine":
                    ours[(label, t)] = v
            spec = json.dumps([[[label, path]], [t], args.tokens, args.repeat,
                               args.prompt_tokens])
            out = subprocess.run([str(py), "-c", LLAMA_SIDE, spec], check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                v = json.loads(line)
                theirs[(v["label"], v["threads"])] = v
            print(f"measured {label} at {t} thread(s)", file=sys.stderr)

    head = (f"{'file':<8} {'thr':>3} | {'decode tok/s ours':>17} {'llama.cpp':>9} {'ratio':>6} | "
            f"{'prefill ' + str(args.prompt_tokens) + ' ours':>16} {'llama.cpp':>9} {'ratio':>6} | "
            f"{'batch 1 / 4 / 8 tok/s (ours)':<28} | load ms (candle before)")
    print(head)
    print("-" * len(head))
    misses = []
    # candle's path loads only Llama-2 style files: "-" for the other families.
    candle = lambda o: "-" if o.get("candle_load_ms") is None else f"{o['candle_load_ms']:.0f}"
    for label, _ in files:
        for t in threads:
            o, l = ours[(label, t)], theirs[(label, t)]
            rd = o["decode_tokens_per_s"] / l["decode_tokens_per_s"]
            rp = o["prefill_tokens_per_s"] / l["prefill_tokens_per_s"]
            b = dict((int(k), r) for k, r in o["batch_tokens_per_s"])
            batch = " / ".join(f"{b[k]:.0f}" for k in sorted(b))
            flag = lambda ok: " " if ok else "*"
            print(f"{label:<8} {t:>3} | {o['decode_tokens_per_s']:>17.1f} "
                  f"{l['decode_tokens_per_s']:>9.1f} {rd:>5.2f}{flag(rd >= 1.0)} | "
                  f"{o['prefill_tokens_per_s']:>16.1f} {l['prefill_tokens_per_s']:>9.1f} "
                  f"{rp:>5.2f}{flag(rp >= 0.8)} | {batch:<28} | "
                  f"{o['load_ms']:.0f} ({candle(o)})")
            if rd < 1.0:
                misses.append(f"{label} {t} thread(s): decode ratio {rd:.2f} < 1.0")
            if rp < 0.8:
                misses.append(f"{label} {t} thread(s): prefill ratio {rp:.2f} < 0.8")
            if 8 in b and 1 in b and b[8] < 3 * b[1]:
                misses.append(f"{label} {t} thread(s): batch 8 is {b[8] / b[1]:.1f}x batch 1 < 3x")
    print("\n* misses its target (decode >= 1.0, prefill >= 0.8)")
    for m in misses:
        print("  " + m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
