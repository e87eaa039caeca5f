# The paged page-16 decode rows that trail contiguous by more than 5% (B 1 / 8, one block per
# SM on the deep ring), under the plan's knobs only, no kernel change: the plan as it stands
# (contiguous and page 16), the shallow ring (FLASHBUF_DECODE_RING=shared), and twice the
# splits (two blocks per SM, the slots' wave), alternating, two rounds; then ncu of one launch
# of contiguous and page 16 at B 1 32/8 KV 32k for the stall reasons per SASS chunk.
# Here: carry [".deps"]; about 300 s.
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=/root/call/c; rm -rf $O; mkdir -p $O; pack() { tar -C /root/call -czf $OUT/c.tgz c; }
source scripts/gpu/device_deps.sh unpack >/dev/null; R=$PWD
CMAKE_BUILD_PARALLEL_LEVEL=16 CMAKE_ARGS="-DFLASHBUF_CUDA_ARCHS=90a -DFLASHBUF_INSTANTIATIONS=bf16_128_128 \
  -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128" python3 -m pip install --no-build-isolation --no-deps --target /tmp/pkg . \
  > $O/pip.log 2>&1; echo "pip exit $?"; el build
# group: heads, batch, kv lengths, doubled split count
groups=("32/8,64/8|1|8192,32768,131072|32" "32/8,64/8|8|2048,8192,32768|4" "32/32|1|8192,32768,131072|8")
for r in 1 2; do for gi in 0 1 2; do IFS='|' read -r H B KV S2 <<< "${groups[$gi]}"
  for cfg in plan shared split2; do
    [ $(( $(date +%s) - t0 )) -lt ${SWEEP_BEFORE_S:-330} ] || break 3
    case $cfg in plan) env=""; pg=0,16;; shared) env="FLASHBUF_DECODE_RING=shared"; pg=16;; split2) env="FLASHBUF_DECODE_SPLITS=$S2"; pg=16;; esac
    (cd /tmp && env $env PYTHONPATH=/tmp/pkg timeout 60 python3 $R/bench/bench.py --decode --heads $H --b $B --kv $KV \
       --pages $pg --target-ms 5 --anchors none --out $O/g$gi-$cfg-$r.json > $O/g$gi-$cfg-$r.log 2>&1)
    echo "== g$gi $cfg $r"; grep -E "^ *[0-9]+/" $O/g$gi-$cfg-$r.log
  done; done; pack; done; el sweep
for pg in 0 16; do
  (cd /tmp && PYTHONPATH=/tmp/pkg timeout 90 ncu --set full --import-source yes -k regex:decode_split -c 1 -f \
     -o $O/ncu-p$pg python3 $R/bench/profile_decode.py 1 32 8 32768 $pg cudnn > $O/ncu-p$pg.log 2>&1)
  ncu --import $O/ncu-p$pg.ncu-rep --page source --csv --print-source sass > $O/src-p$pg.csv 2>/dev/null
  python3 bench/ncu_stalls.py $O/src-p$pg.csv 128 > $O/stalls-p$pg.txt 2>&1; head -30 $O/stalls-p$pg.txt
  ncu --import $O/ncu-p$pg.ncu-rep --page details > $O/details-p$pg.txt 2>/dev/null; rm -f $O/src-p$pg.csv
done; el ncu; pack; ls -la $OUT
