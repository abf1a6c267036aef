"""swactor beside llama.cpp on correctness: greedy ids and tokenization.

Used by scripts/bench-llama-cpp.py before it benchmarks (and alone with its
`--parity-only`). Three checks, each printing one line per case:

  1. Synthesized models of every family (`swactor model synth --arch A`, F32 weights),
     the mixtures of experts (qwen3moe, qwen2moe, mixtral) included: swactor's 64 greedy
     ids must equal llama.cpp's exactly. The mixtures of experts at Q8_0 and Q4_0 are
     teacher-forced as the real files are (check 2).
  2. Real quantized files (Gemma 3 270M Q4_K_M, SmolLM2 Q4_1), teacher-forced over
     llama.cpp's 64 greedy ids: wherever swactor's choice differs, llama.cpp's own margin
     between the two tokens must be a near-tie (below NEAR_TIE logits; llama.cpp itself
     moves its logits by that much between a batched and a one-token evaluation); swactor
     then continues from llama.cpp's token. The near-ties are counted and printed.
  3. Tokenization of a corpus of awkward strings (digits, contractions, CJK, emoji,
     whitespace runs, special tokens) on every pre-tokenizer's vocabulary (llama.cpp's
     test vocabularies, fetched by .ci/fetch-models --tests) and on the real files: equal ids,
     with and without matching special tokens.
"""

import json
import subprocess
from pathlib import Path

MOE_FAMILIES = ["qwen3moe", "qwen2moe", "mixtral", "gpt-oss"]
FAMILIES = ["llama", "llama3", "qwen2", "qwen3", "gemma3"] + MOE_FAMILIES
NEAR_TIE = 0.5
SYNTH_PROMPT = "The river ran past the old mill"
LILY = "Once upon a time there was a little girl named Lily."
CORPUS = [
    "Hello, World!",
    " leading space and trailing space ",
    "1234567 3.14159 2024-12-01 12345678901234567890",
    "I'm sure you're right, we've seen they'll go; she'd said it's DON'T WON'T",
    "你好世界，这是一个测试。 こんにちは世界 안녕하세요",
    "emoji 🙂👍🏽 🚀✨ family 👨‍👩‍👧",
    "a  b   c\t\td\n\n\ne    f\r\n  \n",
    "naïve café Ångström Zürich",
    'fn main() { println!("{}", x + 1); } // done',
    "<|endoftext|> <|im_start|>user\nhi<|im_end|>",
    "<start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\n",
    "<s>[INST] hi [/INST] <|begin_of_text|><|eot_id|>",
    "   ",
    "\n",
]

# Runs inside the venv: llama.cpp's greedy ids (one token at a time after the prompt) and
# the logits of each step.
LLAMA_GREEDY = r"""
import json, sys
import llama_cpp
path, prompt_ids, n = json.loads(sys.argv[1])
llm = llama_cpp.Llama(path, n_threads=2, n_ctx=512, seed=0, verbose=False, logits_all=True)
llm.eval(prompt_ids)
ids, logits = [], []
for _ in range(n):
    row = [float(v) for v in llm.scores[llm.n_tokens - 1]]
    top = sorted(range(len(row)), key=lambda i: -row[i])[:32]
    t = top[0]
    if t == llm.token_eos():
        break
    ids.append(t)
    logits.append({str(i): row[i] for i in top})
    llm.eval([t])
print(json.dumps({"ids": ids, "logits": logits}))
"""

# Runs inside the venv: llama.cpp's ids of every text, with and without special tokens.
LLAMA_TOKENIZE = r"""
import json, sys
import llama_cpp
path, texts = json.loads(sys.argv[1])
llm = llama_cpp.Llama(path, vocab_only=True, verbose=False)
out = {}
for special in (False, True):
    out[str(special)] = [llm.tokenize(t.encode(), add_bos=False, special=special) for t in texts]
print(json.dumps(out))
"""


def run(cmd) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def our_ids(swactor: str, model: str, n: int, prompt=None, ids=None) -> list:
    cmd = [swactor, "generate", "--model", model, "--max-tokens", str(n), "--threads", "2",
           "--json"]
    cmd += ["--prompt", prompt] if ids is None else ["--prompt-ids", ",".join(map(str, ids))]
    lines = [json.loads(line) for line in run(cmd).splitlines()]
    return [v["id"] for v in lines if v.get("type") == "token"]


def our_tokens(swactor: str, model: str, texts: list, special: bool, bos: bool = False) -> list:
    cmd = [swactor, "model", "tokenize", "--model", model, "--json"]
    if special:
        cmd.append("--parse-special")
    if bos:
        cmd.append("--add-special")
    for t in texts:
        cmd += ["--text", t]
    return [json.loads(line)["ids"] for line in run(cmd).splitlines()]


def llama_greedy(py: Path, model: str, prompt_ids: list, n: int) -> dict:
    return json.loads(run([str(py), "-c", LLAMA_GREEDY, json.dumps([model, prompt_ids, n])]))


def check_synthesized(swactor: str, py: Path, cache: Path, tokens: int) -> bool:
    ok = True
    for arch in FAMILIES:
        model = cache / "bench-models" / f"synth-{arch}-f32-s2.gguf"
        if not model.exists():
            model.parent.mkdir(parents=True, exist_ok=True)
            run([swactor, "model", "synth", "--arch", arch, "--out", str(model), "--blocks", "6",
                 "--seed", "2", "--dtype", "f32"])
        prompt = our_tokens(swactor, str(model), [SYNTH_PROMPT], False, bos=True)[0]
        ours = our_ids(swactor, str(model), tokens, prompt=SYNTH_PROMPT)
        theirs = llama_greedy(py, str(model), prompt, tokens)["ids"]
        if ours == theirs:
            print(f"ids  {arch:<8} synthesized F32: {len(ours)} greedy ids equal llama.cpp's "
                  f"({len(set(ours))} distinct)")
        else:
            at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b),
                      min(len(ours), len(theirs)))
            print(f"ids  {arch:<8} synthesized F32: DIFFER at {at}: ours {ours[:at + 3]} "
                  f"llama.cpp {theirs[:at + 3]}")
            ok = False
    return ok


def check_quantized_moe(swactor: str, py: Path, cache: Path, tokens: int) -> bool:
    """Each mixture of experts synthesized at Q8_0, Q4_0 and MXFP4 (experts; the rest Q8_0):
    teacher-forced as the real files
    are (activations are quantized to 8 bits on both sides, so a router's near-tie may pick
    another expert; each such step is counted and printed)."""
    ok = True
    for arch in MOE_FAMILIES:
        for dtype in ("q8_0", "q4_0", "mxfp4"):
            model = cache / "bench-models" / f"synth-{arch}-{dtype}-s2.gguf"
            if not model.exists():
                model.parent.mkdir(parents=True, exist_ok=True)
                run([swactor, "model", "synth", "--arch", arch, "--out", str(model), "--blocks",
                     "6", "--seed", "2", "--dtype", dtype])
            ok = check_forced(swactor, py, f"{arch} {dtype}", str(model), tokens) and ok
    return ok


def check_forced(swactor: str, py: Path, label: str, model: str, tokens: int) -> bool:
    prompt = our_tokens(swactor, model, [LILY], False, bos=True)[0]
    ref = llama_greedy(py, model, prompt, tokens)
    want, logits = ref["ids"], ref["logits"]
    got = our_ids(swactor, model, len(want), ids=prompt)
    ties = []
    while True:
        at = next((i for i in range(len(want)) if i >= len(got) or got[i] != want[i]), None)
        if at is None:
            break
        if at >= len(got):
            print(f"ids  {label:<8} stopped after {len(got)} of llama.cpp's {len(want)} ids")
            return False
        # llama.cpp's 32 best logits at that step; a choice outside them is no near-tie.
        top = logits[at]
        margin = top[str(want[at])] - top.get(str(got[at]), float("-inf"))
        ties.append((at, round(margin, 3)))
        if margin > NEAR_TIE:
            print(f"ids  {label:<8} DIFFER at {at}: ours {got[at]} llama.cpp {want[at]}, "
                  f"llama.cpp's margin {margin:.3f} > {NEAR_TIE}")
            return False
        rest = len(want) - at - 1
        if rest == 0:  # the near-tie was the last step: nothing after it to compare
            got = want
            continue
        got = want[:at + 1] + our_ids(swactor, model, rest, ids=prompt + want[:at + 1])
    exact = "equal" if not ties else f"equal but for {len(ties)} near-ties (step, margin) {ties}"
    print(f"ids  {label:<8} teacher-forced over llama.cpp's {len(want)} greedy ids: {exact}")
    return True


def check_tokenizers(swactor: str, py: Path, files: list) -> bool:
    ok = True
    for label, model in files:
        theirs = json.loads(run([str(py), "-c", LLAMA_TOKENIZE, json.dumps([model, CORPUS])]))
        for special in (False, True):
            ours = our_tokens(swactor, model, CORPUS, special)
            bad = [i for i, (a, b) in enumerate(zip(ours, theirs[str(special)])) if a != b]
            kind = "special" if special else "plain"
            if bad:
                ok = False
                i = bad[0]
                print(f"tok  {label:<10} {kind:<7}: {len(bad)} of {len(CORPUS)} texts DIFFER, "
                      f"first {CORPUS[i]!r}: ours {ours[i]} llama.cpp {theirs[str(special)][i]}")
            else:
                print(f"tok  {label:<10} {kind:<7}: {len(CORPUS)} texts equal")
    return ok


def check_all(swactor: str, py: Path, root: Path, tokens: int) -> bool:
    cache = root / ".cache"
    models = cache / "models"
    real = [(label, str(models / name)) for label, name in
            [("gemma3", "gemma-3-270m-q4_k_m.gguf"), ("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")]
            if (models / name).exists()]
    vocabs = sorted((cache / "vocab").glob("ggml-vocab-*.gguf"))
    files = [(v.stem.removeprefix("ggml-vocab-"), str(v)) for v in vocabs] + real
    # gpt-oss's o200k pre-tokenizer (`gpt-4o`), on the synthesized gpt-oss's vocabulary.
    files.append(("gpt-4o", str(cache / "bench-models" / "synth-gpt-oss-f32-s2.gguf")))
    ok = check_synthesized(swactor, py, cache, tokens)
    ok = check_quantized_moe(swactor, py, cache, tokens) and ok
    for label, model in real:
        ok = check_forced(swactor, py, label, model, tokens) and ok
    return check_tokenizers(swactor, py, files) and ok
