#!/usr/bin/env bash
# One device call: this tree against a base tree (a `git archive` of an earlier commit with its
# .commit file, carried as .ab/base) through scripts/gpu_ab.sh (both packages built side by side,
# AB_ROUNDS rounds in alternating order, 3 by default), then the cost of sinks in this tree
# (bench.py --sinks ab: flashbuf with and without random sinks, timed in the same rounds).
#   GRIDS unset    points of the prefill and decode grids and the serving grid's varlen
#                  batches; results under $OUT: grid/, serving/, sinks.json
#   GRIDS="sm90 decode sm80 paged" (any of them)
#                  the grids of record instead (bench/results/RECORD.json's commands), whole;
#                  results under $OUT/<grid>/{base,main}*.json (with more than 8 files in all,
#                  $OUT/<grid>.tgz each); no sinks run
#   SKIP_SINKS=1   no sinks run; GPU_TESTS / AB_TEST_TREES as in gpu_ab.sh (the first grid only);
#   AB_INTERLEAVE=1 as in gpu_ab.sh: each point timed by both trees back to back
#   here:  scripts/ab_trees.sh -b BASE      then carry [".ab", ".deps", ".commit"]
# Later calls on the same warm machine reuse the packages (AB_SKIP_BUILD=1).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
source scripts/gpu/device_deps.sh unpack
here=$(basename "$PWD")
export AB_ROUNDS=${AB_ROUNDS:-3}
ab() {  # $1 results folder, $2 seconds per round (both trees), the rest: bench.py arguments
  local dir=$1 t=$(( 120 + $2 * AB_ROUNDS ))  # 120 s: the two packages' build
  shift 2
  OUT=$OUT/$dir timeout "$t" scripts/gpu_ab.sh .ab/base . -- "$@"
  export AB_SKIP_BUILD=1 GPU_TESTS=
}
if [ -n "${GRIDS:-}" ]; then
  for g in $GRIDS; do
    case $g in
      sm90) ab sm90 140 --prefill --backend sm90 --target-ms 5 --anchors none ;;
      sm80) ab sm80 110 --prefill --backend sm80 --target-ms 5 --anchors none ;;
      paged) ab paged 40 --prefill --prefill-page 16 --d 64,128,256 --s 1024,4096 --target-ms 10 --anchors none ;;
      decode) ab decode 80 --decode --target-ms 5 --anchors none ;;
      *) echo "regression_ab.sh: unknown grid $g (sm90, sm80, paged, decode)" >&2; exit 2 ;;
    esac
  done
  # The device returns at most 8 files: past that, each grid's folder travels as one archive.
  if [ "$(find "$OUT" -type f | wc -l)" -gt 8 ]; then
    for g in $GRIDS; do [ -d "$OUT/$g" ] && tar czf "$OUT/$g.tgz" -C "$OUT" "$g" && rm -rf "${OUT:?}/$g"; done
  fi
  exit 0
fi
ab grid 60 --d 64,128,256 --s 1024,8192 --heads 32/8 --b 1,32 --kv 2048,32768 --pages 0,16 --target-ms 4 --anchors none
ab serving 10 --serving --serving-cases varlen --target-ms 4 --anchors none
[ "${SKIP_SINKS:-0}" = 1 ] || (cd /tmp && PYTHONPATH="/tmp/ab-pkg-$here" PYTHONUNBUFFERED=1 timeout 80 python3 "$OLDPWD/bench/bench.py" \
   --d 128 --s 1024,8192 --heads 32/8 --b 1,32 --kv 2048,32768 --pages 16 --sinks ab --rounds 2 --target-ms 4 \
   --anchors none --out "$OUT/sinks.json" --plot /tmp/sinks.png 2>&1 | tail -30)
