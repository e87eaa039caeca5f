# Stop 66, call 1 of the decode file of record (scripts/gpu/records.sh: builds the package, stashes
# FA4's part carried here), then, on that package, where paged decode's lead over contiguous goes
# at the long rows: bench/paged_locality.py (pages in order, shuffled in windows, over the pool).
# Here: HEAD's short hash in .commit; carry [".deps", ".commit", ".fa4site/part.ab", ".fa4site/SHA256SUMS"].
R=$PWD
bash scripts/gpu/records.sh decode 2>&1 | tail -3
for a in "1 131072 16" "1 32768 16" "8 32768 16"; do
  (cd /tmp && PYTHONPATH=$HOME/flashbuf-package timeout 120 python3 $R/bench/paged_locality.py $a 2>&1 | tail -8)
done | tee $OUT/paged-locality.txt
