#!/usr/bin/env python3
"""swactor's CPU engine beside llama.cpp, on the same GGUF files, in one run, per kernel tier.

For every kernel tier this CPU runs (AVX2 everywhere, AVX-512 VNNI where the CPU has it;
`--tiers` to choose) it compares swactor's engine on that tier (`SWACTOR_ENGINE_ISA`)
with llama.cpp built for the same tier: llama.cpp built without AVX-512
(`GGML_AVX512=OFF`) beside the AVX2 tier, llama.cpp's AVX-512 build beside the AVX-512
tier. Each llama.cpp build is made once (llama-cpp-python, pinned, with the CMAKE_ARGS
that avoid the AMX instructions these VMs advertise but fault on) into
.cache/llama-cpp-venv (AVX-512) or .cache/llama-cpp-venv-avx2.

The files: SmolLM2 (Q4_1 as shipped), Gemma 3 270M (Q4_K_M as shipped, when
.ci/fetch-models --tests has fetched it), a 1.1B llama written on the fly by `swactor model
synth` (22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000) re-quantized to each
of `--types` (default Q4_0, Q8_0 and Q4_K_M, the K-quant mix published files use), and a
mixture of experts with Qwen3-30B-A3B's block shape (128 experts of 768, 8 used per token;
`--moe-blocks` of its 48 blocks, default 4) synthesized at each of `--moe-types`, and one
with gpt-oss-20b's block shape (32 experts of 2880, 4 used, heads of 64; the same number of
blocks) with MXFP4 experts. For
every file and thread count, interleaved so that both engines see the same machine:

  - decode tokens/s: greedy, N tokens after the 12-token Lily prompt;
  - prefill tokens/s: one prompt of each of `--prompt-tokens` (128 and 512);

printed side by side with the ratio (ours / llama.cpp) against the targets (decode and
prefill >= 1.0), with swactor's aggregate decode at each batch size, under a line naming
the CPU, its flags and the tier. First it checks correctness against the same peer (the
checks live in scripts/llama_cpp_parity.py): every synthesized family equal id for id,
Gemma 3 270M and SmolLM2 teacher-forced (only near-ties may differ), tokenization of an
awkward corpus on every pre-tokenizer; exit 1 if any fails. Not part of CI: it compiles
llama.cpp (6-10 minutes on 2 cores per build, once) and runs for a while (about 2.5
minutes per file, thread count and tier on 2 cores).

Usage: scripts/bench-llama-cpp.py [--tiers avx2,avx512] [--files smollm2,gemma3,1b,moe,gpt-oss]
       [--moe-blocks 4] [--moe-types q4_0,q8_0]
       [--types q4_0,q8_0,q4_k_m] [--threads 1,2] [--tokens 64] [--prompt-tokens 128,512]
       [--batch 1,4,8] [--repeat 2] [--swactor target/release/swactor]
       [--parity-only | --no-parity]
       scripts/bench-llama-cpp.py --products [--tiers ...] [--threads 1,2] [--formats ...]
       [--cols 4096]   (each format's product with its weights in cache, both engines:
                        scripts/llama_cpp_products.py)
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_cpp_parity  # noqa: E402
import llama_cpp_products  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
LLAMA_CPP_PYTHON = "llama-cpp-python==0.3.36"
COMMON_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_BMI2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
)
# Per tier: where llama.cpp is built and with which instruction sets.
BUILDS = {
    "avx512": (CACHE / "llama-cpp-venv",
               COMMON_ARGS + " -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON "
               "-DGGML_AVX512_BF16=ON"),
    "avx2": (CACHE / "llama-cpp-venv-avx2",
             COMMON_ARGS + " -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF "
             "-DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF"),
}
SYNTH_1B = ["--blocks", "22", "--hidden", "2048", "--heads", "32", "--kv-heads", "4",
            "--ffn", "5632", "--vocab", "32000"]
# Qwen3-30B-A3B's block shape (hidden 2048, 32 / 4 heads of 128, 128 experts of 768 of
# which a token runs 8), `--moe-blocks` of its 48 blocks, vocab 32000.
SYNTH_MOE = ["--arch", "qwen3moe", "--hidden", "2048", "--heads", "32", "--kv-heads", "4",
             "--ffn", "768", "--experts", "128", "--experts-used", "8", "--vocab", "32000"]
# gpt-oss-20b's block shape (hidden 2880, 64 / 8 heads of 64, 32 experts of 2880 of which a
# token runs 4), `--moe-blocks` of its 24 blocks, MXFP4 experts and Q8_0 elsewhere as
# published, vocab 65536 (the synthesizer's largest).
SYNTH_GPT_OSS = ["--arch", "gpt-oss", "--hidden", "2880", "--heads", "64", "--kv-heads", "8",
                 "--head-dim", "64", "--ffn", "2880", "--experts", "32", "--experts-used", "4",
                 "--vocab", "65536", "--dtype", "mxfp4"]
PROMPT = "Once upon a time there was a little girl named Lily."


def cpu_flags() -> set:
    """The CPU's feature flags, as /proc/cpuinfo spells them."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def cmake_args(tier: str) -> str:
    """llama.cpp's build flags for `tier` on this CPU. AVX-VNNI (the VEX encoding: Intel
    since Alder Lake / Sapphire Rapids, AMD since Zen 5) is a separate extension from
    AVX-512 VNNI: Zen 4 has the second only, and a build with both dies with SIGILL there."""
    args = BUILDS[tier][1]
    if tier == "avx512" and "avx_vnni" in cpu_flags():
        args += " -DGGML_AVX_VNNI=ON"
    return args


def cpu_tiers() -> list:
    """The kernel tiers this CPU runs, narrowest first."""
    flags = cpu_flags()
    tiers = ["avx2"] if {"avx2", "fma", "f16c"} <= flags else []
    if tiers and {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= flags:
        tiers.append("avx512")
    return tiers


def venv_python(tier: str = "avx512") -> Path:
    venv, args = BUILDS[tier][0], cmake_args(tier)
    py = venv / "bin" / "python"
    probe = [str(py), "-c", "import llama_cpp"]
    stamp = venv / "swactor-cmake-args"
    built_with = stamp.read_text() if stamp.exists() else None
    if py.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        if built_with == args:
            check_build(py, tier)
            return py
        print(f"{venv} was built with other flags than this CPU needs: rebuilding",
              file=sys.stderr)
    shutil.rmtree(venv, ignore_errors=True)
    print(f"building {LLAMA_CPP_PYTHON} for {tier} into {venv} (once; several minutes)",
          file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = dict(os.environ, CMAKE_ARGS=args)
    # pip's wheel cache is keyed by the version alone: without --no-cache-dir a second
    # tier would install the first tier's wheel, built with the other CMAKE_ARGS.
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-cache-dir", "--no-binary",
                    "llama-cpp-python", LLAMA_CPP_PYTHON], check=True, env=env)
    stamp.write_text(args)
    check_build(py, tier)
    return py


def check_build(py: Path, tier: str) -> None:
    """Fails unless the venv's ggml CPU library was built for `tier`: the AVX2 build must
    hold no 512-bit instruction, the AVX-512 build must (read with objdump, when present)."""
    lib = next(py.parent.parent.glob("lib/python3*/site-packages/llama_cpp/lib/libggml-cpu.so"))
    try:
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)],
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        print(f"objdump is missing: cannot check that {lib} is an {tier} build",
              file=sys.stderr)
        return
    wide = "%zmm" in text
    if wide != (tier == "avx512"):
        sys.exit(f"{lib} is not an {tier} build (512-bit instructions: {wide}): remove "
                 f"{py.parent.parent} and run again")


# Runs inside the venv: prints one JSON line per (file, threads).
LLAMA_SIDE = r"""
import json, sys, time
import llama_cpp
files, threads, tokens, repeat, prompt_tokens = json.loads(sys.argv[1])
for label, path in files:
    for t in threads:
        llm = llama_cpp.Llama(path, n_threads=t, n_threads_batch=t,
                              n_ctx=max(prompt_tokens) + tokens + 64, seed=0, verbose=False)
        lily = llm.tokenize(PROMPT.encode(), add_bos=True)
        body = llm.tokenize((" " + PROMPT).encode(), add_bos=False)
        prompts = []
        for n in prompt_tokens:
            long = list(lily)
            while len(long) < n:
                long += body
            prompts.append(long[:n])
        decode, prefill = 0.0, [0.0] * len(prompts)
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
            for i, long in enumerate(prompts):
                llm.reset()
                t0 = time.perf_counter()
                llm.eval(long)
                prefill[i] = max(prefill[i], len(long) / (time.perf_counter() - t0))
        print(json.dumps({"label": label, "threads": t, "decode_tokens_per_s": decode,
                          "prefill": prefill}), flush=True)
        del llm
""".replace("PROMPT", repr(PROMPT))


def ints(text: str) -> list:
    return [int(v) for v in text.split(",") if v]


def bench_files(args, swactor: str) -> list:
    """(label, path) of every file measured, writing the 1B model and its copies once."""
    models = CACHE / "bench-models"
    models.mkdir(parents=True, exist_ok=True)
    wanted = [f for f in args.files.split(",") if f]
    files = []
    smol = CACHE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gemma = CACHE / "models" / "gemma-3-270m-q4_k_m.gguf"
    if "smollm2" in wanted and smol.exists():
        files.append(("smollm2", str(smol)))
    if "gemma3" in wanted and gemma.exists():
        files.append(("gemma3", str(gemma)))
    if "1b" in wanted:
        f16 = models / "synth-1b.f16.gguf"
        if not f16.exists():
            tmp = f16.with_suffix(".tmp")
            subprocess.run([swactor, "model", "synth", *SYNTH_1B, "--dtype", "f16", "--out",
                            str(tmp)], check=True, stdout=subprocess.DEVNULL)
            tmp.rename(f16)
        for q in [t for t in args.types.split(",") if t]:
            out = models / f"synth-1b.{q}.gguf"
            if not out.exists():
                tmp = out.with_suffix(".tmp")
                subprocess.run([swactor, "model", "quantize", "--in", str(f16), "--out", str(tmp),
                                "--dtype", q], check=True, stdout=subprocess.DEVNULL)
                tmp.rename(out)
            files.append((f"1b-{q}", str(out)))
    if "moe" in wanted:
        for q in [t for t in args.moe_types.split(",") if t]:
            out = models / f"synth-moe30b-{args.moe_blocks}.{q}.gguf"
            if not out.exists():
                tmp = out.with_suffix(".tmp")
                subprocess.run([swactor, "model", "synth", *SYNTH_MOE, "--blocks",
                                str(args.moe_blocks), "--dtype", q, "--out", str(tmp)],
                               check=True, stdout=subprocess.DEVNULL)
                tmp.rename(out)
            files.append((f"moe-{q}", str(out)))
    if "gpt-oss" in wanted:
        out = models / f"synth-gpt-oss-20b-{args.moe_blocks}.mxfp4.gguf"
        if not out.exists():
            tmp = out.with_suffix(".tmp")
            subprocess.run([swactor, "model", "synth", *SYNTH_GPT_OSS, "--blocks",
                            str(args.moe_blocks), "--out", str(tmp)],
                           check=True, stdout=subprocess.DEVNULL)
            tmp.rename(out)
        files.append(("gpt-oss", str(out)))
    return files


def measure(args, swactor: str, tier: str, files: list, threads: list) -> tuple:
    """Both engines on every file and thread count at `tier`, interleaved."""
    py = venv_python(tier)
    env = dict(os.environ, SWACTOR_ENGINE_ISA=tier)
    ours, theirs, cpu = {}, {}, None
    lengths = ints(args.prompt_tokens)
    for label, path in files:
        for t in threads:
            cmd = [swactor, "bench", "engine", "--json", "--model", path, "--threads", str(t),
                   "--tokens", str(args.tokens), "--prompt-tokens", args.prompt_tokens,
                   "--batch", args.batch, "--repeat", str(args.repeat)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
            for line in out.splitlines():
                v = json.loads(line)
                if v.get("type") == "bench_engine":
                    ours[(label, t)] = v
                elif v.get("type") == "bench_cpu":
                    cpu = v
            spec = json.dumps([[[label, path]], [t], args.tokens, args.repeat, lengths])
            out = subprocess.run([str(py), "-c", LLAMA_SIDE, spec], check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                v = json.loads(line)
                theirs[(v["label"], v["threads"])] = v
            print(f"measured {label} at {t} thread(s) on {tier}", file=sys.stderr)
    return ours, theirs, cpu


def table(tier: str, cpu: dict, files: list, threads: list, lengths: list, ours: dict,
          theirs: dict) -> list:
    """Prints one tier's table; returns its misses."""
    build = "without AVX-512 (GGML_AVX512=OFF)" if tier == "avx2" else "with AVX-512 VNNI"
    print(f"\nCPU: {cpu['model']} [{' '.join(cpu['flags'])}]")
    print(f"tier {tier}: swactor SWACTOR_ENGINE_ISA={tier} (engine kernels: {cpu['engine_isa']}) "
          f"beside llama.cpp 0.3.36 built {build}")
    pre = " | ".join(f"{'prefill ' + str(n) + ' ours':>16} {'llama.cpp':>9} {'ratio':>6}"
                     for n in lengths)
    head = (f"{'file':<10} {'thr':>3} | {'decode ours':>11} {'llama.cpp':>9} {'ratio':>6} | "
            f"{pre} | batch tok/s (ours)")
    print(head)
    print("-" * len(head))
    misses = []
    flag = lambda ok: " " if ok else "*"
    for label, _ in files:
        for t in threads:
            o, l = ours[(label, t)], theirs[(label, t)]
            rd = o["decode_tokens_per_s"] / l["decode_tokens_per_s"]
            cells = [f"{o['decode_tokens_per_s']:>11.1f} {l['decode_tokens_per_s']:>9.1f} "
                     f"{rd:>5.2f}{flag(rd >= 1.0)}"]
            if rd < 1.0:
                misses.append(f"{tier} {label} {t} thread(s): decode {rd:.2f}")
            for (n, mine), theirs_n in zip(o["prefill"], l["prefill"]):
                rp = mine / theirs_n
                cells.append(f"{mine:>16.1f} {theirs_n:>9.1f} {rp:>5.2f}{flag(rp >= 1.0)}")
                if rp < 1.0:
                    misses.append(f"{tier} {label} {t} thread(s): prefill {n} {rp:.2f}")
            batch = " / ".join(f"{r:.0f}" for _, r in sorted(o["batch_tokens_per_s"]))
            print(f"{label:<10} {t:>3} | " + " | ".join(cells) + f" | {batch}")
    return misses


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiers", default=",".join(cpu_tiers()))
    ap.add_argument("--files", default="smollm2,gemma3,1b,moe,gpt-oss")
    ap.add_argument("--moe-blocks", type=int, default=4,
                    help="blocks of the Qwen3-30B-A3B-shaped mixture of experts (of 48)")
    ap.add_argument("--moe-types", default="q4_0,q8_0")
    ap.add_argument("--types", default="q4_0,q8_0,q4_k_m")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompt-tokens", default="128,512")
    ap.add_argument("--batch", default="1,4,8")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--swactor", default=str(ROOT / "target" / "release" / "swactor"))
    ap.add_argument("--products", action="store_true",
                    help="only the cache-resident single-row product of each format "
                    "(--formats, --cols), both engines side by side")
    ap.add_argument("--formats", default=",".join(llama_cpp_products.FORMATS))
    ap.add_argument("--rounds", type=int, default=3,
                    help="--products: interleaved rounds (the median ratio is reported)")
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--parity-only", action="store_true", help="check, do not benchmark")
    ap.add_argument("--no-parity", action="store_true",
                    help="benchmark without the correctness checks (after a run that made them)")
    args = ap.parse_args()
    swactor = args.swactor
    if not Path(swactor).exists():
        subprocess.run(["cargo", "build", "--release"], cwd=ROOT, check=True)
    tiers = [t for t in args.tiers.split(",") if t]
    unknown = [t for t in tiers if t not in BUILDS]
    if unknown or not tiers:
        print(f"tiers must be among {sorted(BUILDS)} (this CPU runs {cpu_tiers()})",
              file=sys.stderr)
        return 2
    if args.products:
        threads, formats = ints(args.threads), args.formats.split(",")
        misses = []
        for tier in tiers:
            ours, theirs, cpu = llama_cpp_products.measure(
                swactor, venv_python(tier), tier, threads, args.cols, formats, LLAMA_CPP_PYTHON,
                args.rounds)
            misses += llama_cpp_products.table(tier, cpu, threads, formats, ours, theirs)
        print("\n* misses its target (the cache-resident product >= 1.0 of llama.cpp's)")
        for m in misses:
            print("  " + m)
        return 0
    if not args.no_parity and not llama_cpp_parity.check_all(
            swactor, venv_python(tiers[-1]), ROOT, args.tokens):
        return 1
    if args.parity_only:
        return 0
    files = bench_files(args, swactor)
    threads = ints(args.threads)
    misses = []
    for tier in tiers:
        ours, theirs, cpu = measure(args, swactor, tier, files, threads)
        misses += table(tier, cpu, files, threads, ints(args.prompt_tokens), ours, theirs)
    print("\n* misses its target (decode and prefill >= 1.0 of llama.cpp)")
    for m in misses:
        print("  " + m)
    return 0


if __name__ == "__main__":
    sys.exit(main())
