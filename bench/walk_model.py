"""Tile-count model of the persistent Hopper prefill's walk (core/work_items.hpp): each item's
work is its query rows times its key tiles (plus a fixed cost), each block's load the sum of
the items WorkItems gives it; prints the makespan (the busiest block) over the mean for the
BENCH.md grid's shapes (16k tokens, hidden 2048), head-major and rank-major item orders.
Not a timing: it isolates the balance of the static walk.

  python3 bench/walk_model.py [--d 64] [--rows 128,192] [--blocks 132] [--mask causal|none]
"""
import argparse
import math


def key_tiles(sq, rows, m, causal, block_n=128):
    last = min((m + 1) * rows, sq) - 1
    return math.ceil((last + 1) / block_n) if causal else math.ceil(sq / block_n)


def makespan_over_mean(s, rows, order, heads, blocks, causal, overhead=0.5):
    batches, m_blocks = 16384 // s, math.ceil(s / rows)
    if order == "head":  # query blocks fastest (heaviest first), then heads, then sequences
        coords = [(b, h, j) for b in range(batches) for h in range(heads) for j in range(m_blocks)]
    else:  # rank-major: every (sequence, head)'s heaviest block, then the next heaviest, ...
        coords = [(b, h, j) for j in range(m_blocks) for b in range(batches) for h in range(heads)]
    work = [key_tiles(s, rows, m_blocks - 1 - j, causal) * rows / 128 + overhead for _, _, j in coords]
    load = [0.0] * blocks
    for r in range(math.ceil(len(work) / blocks)):
        for blk in range(blocks):
            item = r * blocks + (blocks - 1 - blk if r & 1 else blk)
            if item < len(work):
                load[blk] += work[item]
    return max(load) / (sum(work) / blocks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--rows", default="128,192")
    ap.add_argument("--blocks", type=int, default=132)
    ap.add_argument("--mask", default="causal", choices=["causal", "none"])
    a = ap.parse_args()
    heads = 2048 // a.d
    for rows in map(int, a.rows.split(",")):
        for s in (512, 1024, 2048, 4096, 8192, 16384):
            h = makespan_over_mean(s, rows, "head", heads, a.blocks, a.mask == "causal")
            r = makespan_over_mean(s, rows, "rank", heads, a.blocks, a.mask == "causal")
            print(f"rows {rows} S {s:5d} {a.mask}: makespan / mean  head-major {h:.3f}  rank-major {r:.3f}")


if __name__ == "__main__":
    main()
