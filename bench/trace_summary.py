"""Summary of bench/trace_prefill.cu's per-block traces: for each CSV, the launch's span, the
SMs' mean busy share of it, when the first SM ran out of blocks, a least-squares fit of a
block's time to its key tiles (a fixed cost an item plus a cost a tile: it separates the grid
order's idle tail from a slower tile), and where an item's fixed cost goes: its start to its
first tile's softmax, its steady tiles (a tile each), its last product to its end (the epilogue),
and, where the trace has them, the steps of the start and the end and the gap between blocks.

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
    def mean_us(a, b):  # mean time from step a to step b of a block, in us
        return statistics.mean((r[b] - r[a]) / 1e3 for r in rows)
    head = mean_us("start", "first_tile")
    tail = mean_us("last_product", "end")
    steady = [(r["last_product"] - r["first_tile"]) / 1e3 / (r["tiles"] - 1) for r in rows if r["tiles"] > 1]
    # Between a block's end and the next block's start on the same SM.
    in_order = [sorted(v, key=lambda r: r["start"]) for v in by_sm.values()]
    gaps = [(b["start"] - a["end"]) / 1e3 for v in in_order for a, b in zip(v, v[1:])]
    line = (f"{os.path.basename(path):32s} span {span / 1e3:7.1f} us  busy {busy:.3f}  first SM idle at {first_idle:.3f}"
            f"  item {fixed:5.2f} us + {per_tile:.3f} us a tile  (start to first tile {head:.2f} us,"
            f" steady {statistics.mean(steady) if steady else float('nan'):.3f} us a tile, last product to end"
            f" {tail:.2f} us)  blocks/SM {len(rows) / len(by_sm):.1f}")
    if "operands_ready" in rows[0]:  # the steps of the start and the end, each from the step before
        inits = mean_us("start", "barriers_initialised") if "barriers_initialised" in rows[0] else float("nan")
        found = mean_us("start", "block_found") if "block_found" in rows[0] else float("nan")
        line += ("\n    from the start: item found {:.2f}, barriers initialised {:.2f}, Q issued {:.2f},"
                 " the block's barrier {:.2f},"
                 " Q and K(0) landed {:.2f}, first tile done {:.2f} us; from the last product: O final {:.2f},"
                 " stored {:.2f} us; gap to the SM's next block {:.2f} us").format(
                     found, inits, mean_us("start", "q_issued"), mean_us("start", "barriers_ready"),
                     mean_us("start", "operands_ready"), mean_us("start", "first_tile"),
                     mean_us("last_product", "output_final"), mean_us("last_product", "end"),
                     statistics.mean(gaps) if gaps else float("nan"))
    return line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    a = ap.parse_args()
    for path in sorted(glob.glob(os.path.join(a.dir, "trace-*.csv"))):
        print(summary(path))


if __name__ == "__main__":
    main()
