"""Summary of bench/trace_prefill.cu's per-block traces: for each CSV, the launch's span, the
SMs' mean busy share of it, when the first SM ran out of blocks, and a least-squares fit of a
block's time to its key tiles (a fixed cost an item plus a cost a tile), which separates the
grid order's idle tail from a slower tile.

    python3 bench/trace_summary.py DIR [--block-n-d192 128 --block-n-d256 80]
"""
import argparse
import csv
import glob
import math
import os
import re
import statistics


def summary(path, block_n):
    rows = [tuple(int(v) for v in r.values()) for r in csv.DictReader(open(path))]
    rows = [r for r in rows if r[0] > 0]  # blocks that ran
    m = re.search(r"-s(\d+)-c(\d)", os.path.basename(path))
    s, causal = int(m.group(1)), m.group(2) == "1"
    t0, t1 = min(r[0] for r in rows), max(r[2] for r in rows)
    span = t1 - t0
    by_sm = {}
    for start, sm, end, _, _ in rows:
        by_sm.setdefault(sm, []).append((start, end))
    busy = statistics.mean(sum(e - b for b, e in v) for v in by_sm.values()) / span
    first_idle = (min(max(e for _, e in v) for v in by_sm.values()) - t0) / span
    tiles = [math.ceil(min((r[3] + 1) * 128, s) / block_n) if causal else math.ceil(s / block_n) for r in rows]
    times = [(r[2] - r[0]) / 1e3 for r in rows]
    mt, my = statistics.mean(tiles), statistics.mean(times)
    var = sum((x - mt) ** 2 for x in tiles)
    per_tile = sum((x - mt) * (y - my) for x, y in zip(tiles, times)) / var if var else float("nan")
    fixed = my - per_tile * mt if var else my
    return (f"{os.path.basename(path):32s} span {span / 1e3:7.1f} us  busy {busy:.3f}  first SM idle at {first_idle:.3f}"
            f"  item {fixed:5.2f} us + {per_tile:.3f} us a tile  blocks/SM {len(rows) / len(by_sm):.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--block-n-d192", type=int, default=128)
    ap.add_argument("--block-n-d256", type=int, default=80)
    a = ap.parse_args()
    for path in sorted(glob.glob(os.path.join(a.dir, "trace-*.csv"))):
        block_n = a.block_n_d192 if "-d192-" in path else a.block_n_d256
        print(summary(path, block_n))


if __name__ == "__main__":
    main()
