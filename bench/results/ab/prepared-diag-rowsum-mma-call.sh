# DROPPED at stop 61, before any device time: a row sum of P as rounded for P V moves the LSE by up
# to 1.6e-3 (bf16), past the reference check's 1e-3 (bench/lse_rounding_model.py; NOTES-prefill,
# stop 61). Kept as the record of the idea; it refuses to run.
echo "dropped at stop 61: see bench/NOTES-prefill.md"; exit 2
# Prepared at stop 60 for the next GPU time: what a row sum taken by the tensor core (P times a
# column of ones, beside O += P V) would save and cost, in the trace unit (timing only; about 250 s).
# Run on main with carry [".deps"] (this file and its patch travel with the tree):
#   bash bench/results/ab/prepared-diag-rowsum-mma-call.sh
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
O=$OUT/c; mkdir -p $O
source scripts/gpu/device_deps.sh unpack >/dev/null
patch -p1 -s < bench/results/ab/prepared-diag-rowsum-mma.patch || { echo "patch failed"; exit 3; }
timeout 520 python3 bench/trace_variants.py /root/v base= norowsum=-DDIAG_NO_ROWSUM ones=-DDIAG_ONES_PV \
  after=-DDIAG_ONES_AFTER_TURN "both=-DDIAG_NO_ROWSUM -DDIAG_ONES_PV" "bothafter=-DDIAG_NO_ROWSUM -DDIAG_ONES_AFTER_TURN" \
  --rounds 3 > $O/trace-variants.txt 2>&1
tail -40 $O/trace-variants.txt; el variants
cd $OUT && tar czf c.tgz c && rm -rf c && ls -la c.tgz
