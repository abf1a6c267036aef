"""Each weight format's single-row product with its weights resident in cache: swactor's
kernels (`swactor bench products --formats`) beside llama.cpp's (scripts/ggml-products.c,
built against the ggml of the pinned llama-cpp-python of each tier), same shape, same
threads, format by format and round by round interleaved, with the median ratio and its
range. Memory cannot hold either back, so a ratio under 1.0 is the kernel's own miss on any
host. Used by `scripts/bench-llama-cpp.py --products`.
"""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
HARNESS = ROOT / "scripts" / "ggml-products.c"
# Weight bytes per thread each product keeps in cache: swactor's RESIDENT_BYTES.
RESIDENT_BYTES = 256 << 10
# How long one timing repeats the products, ms (the best of five is kept on both sides).
MS = 20
# The formats of the list, in swactor's names.
FORMATS = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k", "q5_k", "q6_k", "f16", "bf16",
           "mxfp4"]


def headers(sdist_spec: str) -> Path:
    """ggml's headers of the pinned llama-cpp-python, from its source package (once)."""
    include = CACHE / "llama-sdist" / "include"
    if (include / "ggml-cpu.h").exists():
        return include
    sdist = CACHE / "llama-sdist"
    sdist.mkdir(parents=True, exist_ok=True)
    tars = list(sdist.glob("llama_cpp_python-*.tar.gz"))
    if not tars:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", "llama-cpp-python", sdist_spec, "-d", str(sdist)],
                       check=True)
        tars = list(sdist.glob("llama_cpp_python-*.tar.gz"))
    include.mkdir(exist_ok=True)
    with tarfile.open(tars[0]) as tar:
        for m in tar.getmembers():
            if "/vendor/llama.cpp/ggml/include/" in m.name and m.name.endswith(".h"):
                m.name = Path(m.name).name
                tar.extract(m, include)
    return include


def harness(py: Path, tier: str, sdist_spec: str) -> Path:
    """scripts/ggml-products.c built against `py`'s venv's ggml (rebuilt when newer)."""
    libs = next(py.parent.parent.glob("lib/python3*/site-packages/llama_cpp/lib"))
    exe = CACHE / f"ggml-products-{tier}"
    if exe.exists() and exe.stat().st_mtime >= HARNESS.stat().st_mtime:
        return exe
    cmd = ["cc", "-O2", "-o", str(exe), str(HARNESS), f"-I{headers(sdist_spec)}",
           f"-L{libs}", f"-Wl,-rpath,{libs}", "-lggml-cpu", "-lggml-base", "-lggml"]
    subprocess.run(cmd, check=True)
    return exe


def ggml_name(fmt: str) -> str:
    """ggml's name of a format (`q4_K` where swactor says `q4_k`)."""
    return fmt[:-2] + "_K" if fmt.endswith("_k") else fmt


def measure(swactor: str, py: Path, tier: str, threads: list, cols: int, formats: list,
            sdist_spec: str, rounds: int = 3) -> tuple:
    """Both sides at every thread count, `rounds` times, format by format, ours then
    llama.cpp's back to back (so that a slow second of a noisy host hits one pair, not one
    side): ({(fmt, t): [ours per round]}, {(fmt, t): [theirs per round]}, cpu)."""
    exe = harness(py, tier, sdist_spec)
    env = dict(os.environ, SWACTOR_ENGINE_ISA=tier)
    ours, theirs, cpu = {}, {}, None
    for k in range(rounds):
        for t in threads:
            for f in formats:
                cmd = [swactor, "bench", "products", "--json", "--formats", f,
                       "--cols", str(cols), "--threads", str(t)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                                     env=env).stdout
                for line in out.splitlines():
                    v = json.loads(line)
                    if v.get("type") == "bench_format":
                        ours.setdefault((v["format"], t), []).append(v)
                    elif v.get("type") == "bench_cpu":
                        cpu = v
                cmd = [str(exe), str(t), str(cols), str(RESIDENT_BYTES), str(MS), ggml_name(f)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                for line in out.splitlines():
                    v = json.loads(line)
                    theirs.setdefault((v["format"].lower(), t), []).append(v)
            print(f"round {k + 1}/{rounds}: measured the products at {t} thread(s) on {tier}",
                  file=sys.stderr)
    return ours, theirs, cpu


def table(tier: str, cpu: dict, threads: list, formats: list, ours: dict, theirs: dict) -> list:
    """Prints one tier's table; returns its misses."""
    one, all_cores = cpu.get("bandwidth_gbps") or (0.0, 0.0)
    print(f"\nCPU: {cpu['model']} [{' '.join(cpu['flags'])}]; memory read {one:.1f} GB/s at "
          f"1 thread, {all_cores:.1f} at one per core")
    rounds = len(next(iter(ours.values())))
    print(f"tier {tier}: cache-resident single-row products, GMAC/s (each call writes its "
          f"activation row fresh and quantizes it), {RESIDENT_BYTES >> 10} KiB of weights per "
          f"thread; the median "
          f"of {rounds} interleaved rounds' ratios, and their range")
    head = (f"{'format':<7} {'thr':>3} {'shape':>10} {'ours':>7} {'(tier)':<7} "
            f"{'llama.cpp':>9} {'(buffer)':<11} {'ratio':>6} {'range':>10}")
    print(head)
    print("-" * len(head))
    misses = []
    for t in threads:
        for f in formats:
            # Each round's pair gives a ratio; the median round is printed, with the range.
            pairs = sorted(zip(ours[(f, t)], theirs[(f, t)]),
                           key=lambda p: p[0]["resident_gmacs"] / p[1]["resident_gmacs"])
            ratios = [o["resident_gmacs"] / l["resident_gmacs"] for o, l in pairs]
            o, l = pairs[len(pairs) // 2]
            r = ratios[len(ratios) // 2]
            mark = " " if r >= 1.0 else "*"
            print(f"{f:<7} {t:>3} {o['rows']:>5}x{o['cols']:<4} {o['resident_gmacs']:>7.1f} "
                  f"{o['isa']:<7} {l['resident_gmacs']:>9.1f} {l['buffer']:<11} {r:>5.2f}{mark}"
                  f" {ratios[0]:>5.2f}-{ratios[-1]:.2f}")
            if r < 1.0:
                misses.append(f"{tier} {f} {t} thread(s): resident product {r:.2f}")
    return misses
