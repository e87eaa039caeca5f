#!/usr/bin/env bash
# Where one warp of the Hopper per-block prefill kernel spends its steady tile, on the GPU
# machine, for flashbuf and (where its site is unpacked) FlashAttention-4 on the same problem:
# one unmasked problem of the BENCH.md grid (16k tokens, hidden 2048, S 8k) per head dim, each
# kernel's Nsight Compute source page read by bench/ncu_phases.py: $OUT/ncu-tile.txt holds the
# tables of the tile's parts (with the commands and cycle counts), $OUT/ncu-tile-instructions.txt
# every executed instruction of each loop (--instructions), and $OUT/ncu-tile.tgz the source
# pages as CSV, kept for reading here.
#
#   scripts/gpu/ncu_tile.sh [D ...]        # default: 128 64
#
# About a minute a head dim. FA4 comes from scripts/gpu/fa4_site.sh's stash: carry one of its
# parts in this call and the other in the call before (the machine warm), or flashbuf alone is
# profiled. The period of a tile is the kernel's SM-active cycles over the block tiles an SM
# runs (the same tile shapes in both kernels at D 64 / 128 / 256: 192 x 128, 128 x 128, 128 x 80).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
root=$PWD
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
work=$(mktemp -d)
S=${NCU_TILE_S:-8192}
dims=("$@")
[ ${#dims[@]} -gt 0 ] || dims=(128 64)
pkg=${FLASHBUF_PACKAGE:-$HOME/flashbuf-package}
commit=$(cat .commit 2>/dev/null || echo unknown)
report=$OUT/ncu-tile.txt
listing=$OUT/ncu-tile-instructions.txt

source scripts/gpu/device_deps.sh unpack >/dev/null
source scripts/gpu/commit_package.sh
commit_package "$pkg" "$work/pip.log" || exit 1
fa4_env=$(bash scripts/gpu/fa4_site.sh env 2>/dev/null)
eval "$fa4_env"
export PYTHONPATH=$pkg${PYTHONPATH:+:$PYTHONPATH}
anchor=fa2 kernels=prefill_sm90
if [ -n "$fa4_env" ]; then anchor=fa4 kernels="prefill_sm90 FlashAttentionForwardSm90"; fi

{
  echo "# scripts/gpu/ncu_tile.sh ${dims[*]} at flashbuf $commit; S $S unmasked; anchor $anchor"
  echo "# (cd /tmp && ncu --set full --import-source yes -k regex:'${kernels// /|}' -c 3 -o REPORT python3 bench/profile_prefill.py D $S full sm90 $anchor)"
  echo "# then per kernel: ncu --import REPORT.ncu-rep --page source --csv --print-source sass -k regex:KERNEL > SOURCE.csv;"
  echo "# python3 bench/ncu_phases.py SOURCE.csv PERIOD --instructions (PERIOD = sm__cycles_active.avg / block tiles an SM)"
} >"$report"
: >"$listing"
for d in "${dims[@]}"; do
  (cd /tmp && ncu --set full --import-source yes -k regex:"${kernels// /|}" -c 3 -o "$work/r$d" -f \
     python3 "$root/bench/profile_prefill.py" "$d" "$S" full sm90 "$anchor") >"$work/ncu-$d.log" 2>&1 ||
    { echo "ncu_tile: D $d failed"; tail -5 "$work/ncu-$d.log"; continue; }
  tiles=$(python3 -c "
import math, torch
d, s = $d, $S
bm, bn = {64: (192, 128), 128: (128, 128), 256: (128, 80)}[d]
blocks = (16384 // s) * (2048 // d) * math.ceil(s / bm)
print(blocks * math.ceil(s / bn) / torch.cuda.get_device_properties(0).multi_processor_count)")
  for k in $kernels; do
    name=$([ "$k" = prefill_sm90 ] && echo flashbuf || echo fa4)
    ncu --import "$work/r$d.ncu-rep" --page source --csv --print-source sass -k regex:"$k" >"$work/source-d$d-$name.csv" 2>&1
    ncu --import "$work/r$d.ncu-rep" --page raw --csv --metrics sm__cycles_active.avg,smsp__inst_executed.sum \
      -k regex:"$k" >"$work/raw-d$d-$name.csv" 2>&1
    # The last launch's (FA4's first call compiles; its second is the one to read).
    period=$(python3 -c "
import csv, sys
rows = [r for r in csv.reader(open('$work/raw-d$d-$name.csv')) if r]
head = next(r for r in rows if 'sm__cycles_active.avg' in r)
last = rows[-1]
cycles = float(last[head.index('sm__cycles_active.avg')].replace(',', ''))
print(f'# D $d $name: sm__cycles_active.avg {cycles:,.0f}, smsp__inst_executed.sum {last[head.index(\"smsp__inst_executed.sum\")]}', file=sys.stderr)
print(round(cycles / $tiles, 1))" 2>>"$report")
    echo "## D $d S $S, $name, period $period cycles ($tiles block tiles an SM)" >>"$report"
    python3 bench/ncu_phases.py "$work/source-d$d-$name.csv" "$period" --instructions >"$work/phases.txt" 2>&1
    awk 'NF == 0 { exit } { print }' "$work/phases.txt" >>"$report"  # the parts; the listing follows a blank line
    { echo "## D $d S $S, $name"; awk 'seen { print } NF == 0 { seen = 1 }' "$work/phases.txt"; } >>"$listing"
  done
done
(cd "$work" && tar czf "$OUT/ncu-tile.tgz" source-*.csv raw-*.csv ncu-*.log 2>/dev/null)
rm -rf "$work"
cat "$report"
