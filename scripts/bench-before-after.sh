#!/usr/bin/env bash
# Runs `bench pipeline`, `bench serve` and `bench speculate` with two builds of swactor,
# one after the other for each benchmark (before, after, before, after), so that a
# restructuring's figures can be compared side by side in one run.
#
#   scripts/bench-before-after.sh BEFORE_BINARY AFTER_BINARY MODEL [OUT_DIR]
#
# Each binary's report goes to OUT_DIR/{before,after}-{bench}-{round}.txt. Nothing else
# is measured while it runs; give it an idle machine.
set -euo pipefail
before=${1:?before binary}
after=${2:?after binary}
model=${3:?model GGUF}
out=${4:-bench-before-after}
mkdir -p "$out"
run() { # label binary bench args...
    local label=$1 bin=$2 bench=$3 round=$4
    shift 4
    echo "== $label $bench (round $round)" >&2
    "$bin" bench "$bench" --model "$model" "$@" > "$out/$label-$bench-$round.txt" 2>&1
}
for round in 1 2; do
    for side in before after; do
        bin=$before
        [ "$side" = after ] && bin=$after
        run "$side" "$bin" pipeline "$round" --tokens 48 --repeat 1
        run "$side" "$bin" serve "$round" --tokens 32 --concurrency 1,4,8
        run "$side" "$bin" speculate "$round" --free 2 --tokens 48
    done
done
echo "results in $out/" >&2
