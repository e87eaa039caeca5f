"""Tile-count model of the persistent Hopper prefill's walk (core/work_items.hpp): each item's
work is its query rows times its key tiles (plus a fixed cost), each block's load the sum of
the items WorkItems gives it; prints the makespan (the busiest block) over the mean, and the
(sequence, head) pairs a round touches on average (their K/V share the L2 only within a round),
for the BENCH.md grid's shapes (16k tokens, hidden 2048) in three item orders:
  head      query blocks fastest, heaviest first (item_coords)
  paired    units of two neighbouring items, a head's blocks heavy, light, heavy, ... (how D 64's
            192-row items were walked until they took a block each; NOTES-prefill, stop 44)
  rank      every head's heaviest block, then every head's next (measured and dropped at stop 22:
            1.00-1.03x here, but 0.75-0.96x on the H200: a round reads 16-130 heads' K/V)
Not a timing: it isolates the balance of the static walk.

  python3 bench/walk_model.py [--d 64] [--rows 128,192] [--blocks 132] [--mask causal|none]
"""
import argparse
import math


def key_tiles(sq, rows, m, causal, block_n=128):
    last = min((m + 1) * rows, sq) - 1
    return math.ceil((last + 1) / block_n) if causal else math.ceil(sq / block_n)


def paired_from_last(k, m_blocks, head_seq):
    """The paired numbering: a head's k-th item, counted from its last query block."""
    if m_blocks % 2 == 1 and head_seq % 2 == 1:
        if k == 0:
            return m_blocks // 2
        k -= 1
    return m_blocks - 1 - k // 2 if k % 2 else k // 2


def walk(s, rows, order, heads, blocks, causal, overhead=0.5):
    batches, m_blocks = 16384 // s, math.ceil(s / rows)
    total = batches * heads * m_blocks
    if order == "rank":
        coords = [(g, j) for j in range(m_blocks) for g in range(batches * heads)]
    else:
        coords = [divmod(i, m_blocks) for i in range(total)]
        if order == "paired":
            coords = [(g, paired_from_last(k, m_blocks, g)) for g, k in coords]
    work = [key_tiles(s, rows, m_blocks - 1 - j, causal) * rows / 128 + overhead for _, j in coords]
    size = 2 if order == "paired" else 1  # items a unit
    units = [list(range(u, min(u + size, total))) for u in range(0, total, size)]
    load, touched = [0.0] * blocks, []
    for r in range(math.ceil(len(units) / blocks)):
        heads_this_round = set()
        for blk in range(blocks):
            u = r * blocks + (blocks - 1 - blk if r & 1 else blk)
            if u < len(units):
                load[blk] += sum(work[i] for i in units[u])
                heads_this_round.update(coords[i][0] for i in units[u])
        touched.append(len(heads_this_round))
    return max(load) / (sum(work) / blocks), sum(touched) / len(touched)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--rows", default="128,192")
    ap.add_argument("--blocks", type=int, default=132)
    ap.add_argument("--mask", default="causal", choices=["causal", "none"])
    a = ap.parse_args()
    heads = 2048 // a.d
    print("makespan / mean, heads a round")
    for rows in map(int, a.rows.split(",")):
        for s in (512, 1024, 2048, 4096, 8192, 16384):
            cells = []
            for order in ("head", "paired", "rank"):
                m, h = walk(s, rows, order, heads, a.blocks, a.mask == "causal")
                cells.append(f"{order} {m:.3f} {h:4.0f}")
            print(f"rows {rows} S {s:5d} {a.mask}: " + "   ".join(cells))


if __name__ == "__main__":
    main()
