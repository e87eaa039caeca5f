#!/usr/bin/env bash
# One device call: this tree against a base tree (a `git archive` of an earlier commit with its
# .commit file, carried as .ab/base) on points of the prefill and decode grids and on the
# serving grid's varlen batches (scripts/gpu_ab.sh: both packages built side by side, two
# rounds in alternating order), then the cost of sinks in this tree (bench.py --sinks ab:
# flashbuf with and without random sinks, timed in the same rounds). Results under $OUT:
# grid/{base,main}.json, serving/{base,main}.json, sinks.json and their logs (SKIP_SINKS=1: no sinks run).
#   here:  rm -rf .ab && mkdir -p .ab/base && git archive BASE -- . ':!bench/results' | tar -x -C .ab/base
#          && echo BASE > .ab/base/.commit      then carry [".ab", ".deps", ".commit"]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
source scripts/gpu/device_deps.sh unpack
here=$(basename "$PWD")
grid=(--d 64,128,256 --s 1024,8192 --heads 32/8 --b 1,32 --kv 2048,32768 --pages 0,16 --target-ms 4 --anchors none)
OUT=$OUT/grid AB_ROUNDS=2 timeout 290 scripts/gpu_ab.sh .ab/base . -- "${grid[@]}"
OUT=$OUT/serving AB_SKIP_BUILD=1 timeout 60 scripts/gpu_ab.sh .ab/base . -- --serving --serving-cases varlen --target-ms 4 --anchors none
[ "${SKIP_SINKS:-0}" = 1 ] || (cd /tmp && PYTHONPATH="/tmp/ab-pkg-$here" PYTHONUNBUFFERED=1 timeout 80 python3 "$OLDPWD/bench/bench.py" \
   --d 128 --s 1024,8192 --heads 32/8 --b 1,32 --kv 2048,32768 --pages 16 --sinks ab --rounds 2 --target-ms 4 \
   --anchors none --out "$OUT/sinks.json" --plot /tmp/sinks.png 2>&1 | tail -30)
