"""The consumers' softmaxes side by side, from bench/trace_prefill.cu's per-tile stamps (built
with -DTRACE_TILES): for each consumer warpgroup of a block and each steady tile, when K(i)
landed, when S(i) was done (its softmax starts) and when its softmax was done, in the SM's
cycles. Prints, over every block's tiles (the item's first two and its last left out), the
medians of: the tile's period (K landed to the next K landed), the wait from K to S done (turn,
products, S), the softmax, the cycles of it during which another consumer of the block was in
its own softmax (the overlap), and how long after consumer 0's softmax consumer 1's starts on
the same tile; the same by tile index (is the overlap there from the start, or does it grow?)
and by consumer; and the least-squares line of the softmax's length on its overlap. The line's
intercept is a softmax that overlaps no other softmax but still runs beside the other
consumers' products, rescales and packing, so it is longer than a softmax alone. Blocks where one
consumer alone stamped (a diagnostic build that idles the others) make a row of their own,
"alone", outside the others and the fit.

    python3 bench/tile_overlap.py OUTDIR/trace-d128-s8192-c0-sec0-tiles.csv [...]
"""
import argparse
import collections
import statistics

NEIGHBOURS = 2  # another consumer's tiles i - 2 .. i + 2 are the ones a softmax shorter than the period can meet


def read(path: str) -> dict:
    """block -> {consumer: [(k_landed, s_done, softmax_done) a tile, None where not stamped]}"""
    blocks = collections.defaultdict(dict)
    with open(path) as f:
        next(f)
        for line in f:
            v = [int(x) for x in line.split(",")]
            stamps = v[2:]
            tiles = [tuple(stamps[i:i + 3]) for i in range(0, len(stamps), 3)]
            blocks[v[0]][v[1]] = [t if t[2] else None for t in tiles]
    return blocks


def overlap(a: tuple, b: tuple) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def tiles(blocks: dict):
    """(consumer, tile index, period, K to S done, softmax, overlap, consumer 1's start after
    consumer 0's or None, alone: the block's only stamping consumer) for every steady tile of
    every consumer of a block"""
    for consumers in blocks.values():
        alone = len(consumers) == 1
        spans = {c: [(t[1], t[2]) if t else None for t in ts] for c, ts in consumers.items()}
        for c, ts in consumers.items():
            for i in range(2, len(ts) - 1):
                t, nxt = ts[i], ts[i + 1]
                if not t or not nxt:
                    continue
                mine = (t[1], t[2])
                shared = sum(overlap(mine, s) for o, ss in spans.items() if o != c
                             for s in ss[max(0, i - NEIGHBOURS):i + NEIGHBOURS + 1] if s)
                later = None
                if c == 0 and 1 in spans and i < len(spans[1]) and spans[1][i]:
                    later = spans[1][i][0] - t[1]
                yield c, i, nxt[0] - t[0], t[1] - t[0], t[2] - t[1], shared, later, alone


def summarize(path: str) -> None:
    rows = collections.defaultdict(list)
    for row in tiles(read(path)):
        c, i, alone = row[0], row[1], row[-1]
        keys = ("alone",) if alone else ("all", "2-3" if i < 4 else "4-15" if i < 16 else "16-", f"c{c}")
        for key in keys:
            rows[key].append(row[2:-1])
    print(path)
    print(f"{'tiles':>6} {'count':>8} {'period':>7} {'K->S done':>9} {'softmax':>8} {'overlap':>8} {'consumer 1 starts after 0':>26}")
    for key in ("all", "2-3", "4-15", "16-", *sorted(k for k in rows if k.startswith("c")), "alone"):
        r = rows.get(key)
        if not r:
            continue
        med = [statistics.median(x[j] for x in r) for j in range(4)]
        later = [x[4] for x in r if x[4] is not None]
        off = f"{statistics.median(later):.0f}" if later else "-"
        print(f"{key:>6} {len(r):>8} {med[0]:>7.0f} {med[1]:>9.0f} {med[2]:>8.0f} {med[3]:>8.0f} {off:>26}")
    r = rows.get("all")
    if r and len({x[3] for x in r}) > 1:
        fit = statistics.linear_regression([x[3] for x in r], [x[2] for x in r])
        print(f"softmax = {fit.intercept:.0f} + {fit.slope:.3f} x overlap (least squares over {len(r)} tiles)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    for path in ap.parse_args().csv:
        summarize(path)


if __name__ == "__main__":
    main()
