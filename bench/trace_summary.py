"""Summary of bench/trace_prefill.cu's per-block traces: for each CSV, the launch's span, the
SMs' mean busy share of it, when the first SM ran out of blocks, a least-squares fit of a
block's time to its key tiles (a fixed cost an item plus a cost a tile: it separates the grid
order's idle tail from a slower tile), and where an item's fixed cost goes: its start to its
first tile's softmax, its steady tiles (a tile each), its last product to its end (the epilogue).

    python3 bench/trace_summary.py DIR
"""
import argparse
import csv
import glob
import os
import statistics


def summary(path):
    rows = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(open(path))]
    rows = [r for r in rows if r["start"] > 0 and r["tiles"] > 0]  # blocks that ran keys
    t0, t1 = min(r["start"] for r in rows), max(r["end"] for r in rows)
    span = t1 - t0
    by_sm = {}
    for r in rows:
        by_sm.setdefault(r["sm"], []).append(r)
    busy = statistics.mean(sum(r["end"] - r["start"] for r in v) for v in by_sm.values()) / span
    first_idle = (min(max(r["end"] for r in v) for v in by_sm.values()) - t0) / span
    tiles = [r["tiles"] for r in rows]
    times = [(r["end"] - r["start"]) / 1e3 for r in rows]
    mt, my = statistics.mean(tiles), statistics.mean(times)
    var = sum((x - mt) ** 2 for x in tiles)
    per_tile = sum((x - mt) * (y - my) for x, y in zip(tiles, times)) / var if var else float("nan")
    fixed = my - per_tile * mt if var else my
    head = statistics.mean((r["first_tile"] - r["start"]) / 1e3 for r in rows)
    tail = statistics.mean((r["end"] - r["last_product"]) / 1e3 for r in rows)
    steady = [(r["last_product"] - r["first_tile"]) / 1e3 / (r["tiles"] - 1) for r in rows if r["tiles"] > 1]
    return (f"{os.path.basename(path):32s} span {span / 1e3:7.1f} us  busy {busy:.3f}  first SM idle at {first_idle:.3f}"
            f"  item {fixed:5.2f} us + {per_tile:.3f} us a tile  (start to first tile {head:.2f} us,"
            f" steady {statistics.mean(steady) if steady else float('nan'):.3f} us a tile, last product to end"
            f" {tail:.2f} us)  blocks/SM {len(rows) / len(by_sm):.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    a = ap.parse_args()
    for path in sorted(glob.glob(os.path.join(a.dir, "trace-*.csv"))):
        print(summary(path))


if __name__ == "__main__":
    main()
