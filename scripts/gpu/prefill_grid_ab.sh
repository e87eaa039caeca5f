#!/usr/bin/env bash
# The Hopper prefill launcher's grid rule (core/work_items.hpp: persistent_grid_pays) against both
# forced grids (FLASHBUF_PREFILL_GRID=off: a block per query block; on: the persistent grid) on
# one package, point by point, 3 interleaved rounds (bench/ab_interleaved.py --tuning): the
# results in OUT_DIR/NAME/, the log in OUT_DIR/ab-NAME.log, the ratios in OUT_DIR/NAME-table.log.
#
#   scripts/gpu/prefill_grid_ab.sh PACKAGE_DIR COMMIT OUT_DIR NAME BENCH_ARGS...
#   e.g. scripts/gpu/prefill_grid_ab.sh ~/flashbuf-package $(cat .commit) $OUT d128 --prefill --backend sm90 --d 128
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
[ $# -ge 5 ] || { echo "usage: $0 PACKAGE_DIR COMMIT OUT_DIR NAME BENCH_ARGS..." >&2; exit 2; }
pkg=$1 commit=$2 out=$3 name=$4
shift 4
timeout 200 python3 bench/ab_interleaved.py --out "$out/$name" --rounds 3 \
  --tuning per-block:FLASHBUF_PREFILL_GRID=off --tuning persistent:FLASHBUF_PREFILL_GRID=on \
  "rule=$pkg:$commit" "per-block=$pkg:$commit" "persistent=$pkg:$commit" -- "$@" --target-ms 5 --anchors none \
  >"$out/ab-$name.log" 2>&1
tail -3 "$out/ab-$name.log"
python3 bench/ab_summary.py --table "$out/$name" rule per-block persistent | tee "$out/$name-table.log"
