# Prepared at stop 73, run at stop 74 on an H100 (h100-stop74-decode-split-sweep/table.txt): the decode split plan under the push merge. The plan's split
# counts were fit when the cluster merge pulled (1.30 µs a launch by bench/cluster_merge_rate.cu,
# the push 0.94); at B 1 KV 2k, 16 splits of 2 tiles in one 16-block cluster lost to 8 of 4 by about
# 1 µs then (stop 42's sweep: 7.76 against 6.79 µs). This times the library's plan against forced
# split counts (FLASHBUF_DECODE_SPLITS; the cluster merge wherever the device's clusters hold
# them) on the B 1 rows, alternating, two rounds, on any card (ratios within the call). Here:
#   mkdir -p .abp && git rev-parse --short HEAD > .commit && cp bench/results/ab/h100-stop74-decode-split-sweep-call.sh .abp/call.sh
# then `bash .abp/call.sh` with carry [".deps", ".abp", ".commit"] (about 250 s).
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | head -1 | tee $O/gpu.txt
source scripts/gpu/device_deps.sh unpack >/dev/null
export FLASHBUF_PACKAGE_CMAKE_ARGS="-DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128"
source scripts/gpu/commit_package.sh
commit_package $HOME/flashbuf-package $O/pip.log || exit 1; el package
root=$PWD
for round in 1 2; do
  for s in plan 16 12 8 4; do
    knob=""; [ $s = plan ] || knob="FLASHBUF_DECODE_SPLITS=$s"
    (cd /tmp && env $knob PYTHONPATH=$HOME/flashbuf-package timeout 100 python3 $root/bench/bench.py --decode \
      --heads 32/8,64/8 --b 1 --kv 1024,2048,4096,8192 --pages 0,16 --target-ms 5 --anchors none \
      --out $O/sweep-$s-r$round.json > $O/sweep-$s-r$round.log 2>&1)
    echo "round $round splits $s exit $?"
  done
done
python3 - "$O" <<'PY'
import json, sys, glob, statistics
o = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{o}/sweep-*-r*.json")):
    s = f.split("sweep-")[1].split("-r")[0]
    for r in json.load(open(f))["rows"]:
        k = (r["hq"], r["hkv"], r["sk"], r["page"])
        rows.setdefault(k, {}).setdefault(s, []).append(r["flashbuf"])
names = ["plan", "16", "12", "8", "4"]
print("hq/hkv kv page | " + " ".join(f"{n:>7}" for n in names) + "   (µs, median of the rounds)")
for k in sorted(rows):
    cells = [statistics.median(rows[k][n]) if n in rows[k] else float("nan") for n in names]
    print(f"{k[0]}/{k[1]} {k[2]:5d} {k[3]:3d} | " + " ".join(f"{c:7.2f}" for c in cells))
PY
el sweep; (cd $OUT && tar czf c.tgz c)
