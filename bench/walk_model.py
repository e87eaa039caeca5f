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

--block-per-item models a grid of a block per item instead: each block, in block order, goes to
the first SM to free (one block an SM), for the grid's own order (a pair's query blocks heaviest
first, pair after pair) and for core/work_items.hpp's sections (heaviest first in sections of
about a wave, the short section first; `--block-n` keys a tile). Per-block traces of the H200
(bench/trace_prefill.cu) measured what it predicts for the grid's order, and what it leaves
out: sections of every pair make a key tile dearer (NOTES-prefill, "The causal grid's order").

--varlen LENGTHS models a causal varlen batch on the persistent walk (D 128, 128 x 128 items,
--heads Hq/Hkv): its longest-first order table (core/work_order.hpp) on the static walk, as
launched now, against FlashAttention-4's varlen order (sequences longest first, each in sections
of heads whose K/V fit the L2, a section's query blocks heaviest first, heads innermost) on the
static walk and on a dynamic one (each block takes the next item when it frees, an atomic
counter); per order the makespan over the mean and what a round of `blocks` items reads: its
(sequence, K/V head) pairs and their K/V bytes (each pair's longest key range in the round);
then the K/V each order would read from DRAM through an LRU cache of 25 or 50 MB (the H200's
L2 is 50 MB in two halves), a round's items reading their tiles in step.

  python3 bench/walk_model.py [--d 64] [--rows 128,192] [--blocks 132] [--mask causal|none]
  python3 bench/walk_model.py --block-per-item --d 256 --block-n 80 [--overhead 3]
  python3 bench/walk_model.py --varlen 4096,512,2048,37,8000,1500 [--heads 32/8]
"""
import argparse
import heapq
import math
from collections import OrderedDict


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


def section_pairs(m_blocks, pairs, wave):
    """core/work_items.hpp longest_first_section: about a wave of blocks, 1 = the grid's order."""
    return max(1, min(pairs, (wave + m_blocks // 2) // m_blocks))


def block_per_item(s, heads, block_n, sms, causal, order, overhead):
    """Makespan over the balanced time of a block per 128-row item, dispatched in block order."""
    batches, m_blocks = 16384 // s, math.ceil(s / 128)
    pairs = batches * heads
    section = section_pairs(m_blocks, pairs, sms) if order == "sections" else 1
    lead = pairs % section
    items = [(p, j) for j in range(m_blocks) for p in range(lead)]  # the short section, heaviest first
    for first in range(lead, pairs, section):
        items += [(p, j) for j in range(m_blocks) for p in range(first, first + section)]
    free = [(0.0, i) for i in range(sms)]
    total = 0.0
    for _, j in items:  # j: the query block counted from the last
        work = key_tiles(s, 128, m_blocks - 1 - j, causal, block_n) + overhead
        total += work
        t, sm = heapq.heappop(free)
        heapq.heappush(free, (t + work, sm))
    return max(t for t, _ in free) / (total / sms), section


def varlen_items(lens, heads_q, longest_first_sections, l2_key_tiles=800):
    """(key tiles, sequence, query head) of every 128-row item of a causal varlen batch (D 128,
    128-key tiles), in the order of the longest-first table or of FA4's sections."""
    def item(seq, head, m):
        return math.ceil(min((m + 1) * 128, lens[seq]) / 128), seq, head, m

    if not longest_first_sections:  # buckets by key tiles; sequence order within a bucket
        items = [item(seq, h, m) for seq in range(len(lens)) for h in range(heads_q)
                 for m in range(math.ceil(lens[seq] / 128))]
        return sorted(items, key=lambda it: -it[0])
    ordered = []
    for seq in sorted(range(len(lens)), key=lambda q: -lens[q]):
        m_blocks = math.ceil(lens[seq] / 128)
        section = 16  # heads whose K/V fit the L2 (~50 MB of 64 KB K+V tiles), a power of two
        while section > 1 and m_blocks * section > l2_key_tiles:
            section //= 2
        for h0 in range(0, heads_q, section):
            heads = range(h0, min(h0 + section, heads_q))
            ordered += [item(seq, h, m) for m in reversed(range(m_blocks)) for h in heads]
    return ordered


def varlen_walk(items, blocks, group, dynamic, overhead=0.5):
    """Makespan over the mean, (sequence, K/V head) pairs and their K/V MB a round reads."""
    load = [(0.0, b) for b in range(blocks)]
    pairs_per_round, mb_per_round = [], []
    for r in range(math.ceil(len(items) / blocks)):
        reach = {}
        for j in range(blocks):
            i = r * blocks + j
            if i >= len(items):
                break
            tiles, seq, head, _ = items[i]
            key = (seq, head // group)
            reach[key] = max(reach.get(key, 0), tiles)
            if dynamic:
                t, b = heapq.heappop(load)
                heapq.heappush(load, (t + tiles + overhead, b))
            else:
                b = blocks - 1 - j if r & 1 else j
                load[b] = (load[b][0] + tiles + overhead, b)
        pairs_per_round.append(len(reach))
        mb_per_round.append(sum(reach.values()) * 128 * 256 * 2 / 2**20)  # K and V rows of 256 bytes
    times = [t for t, _ in load]
    return (max(times) / (sum(times) / blocks), sum(pairs_per_round) / len(pairs_per_round),
            sum(mb_per_round) / len(mb_per_round))


def l2_misses(items, blocks, group, mb):
    """K/V MB read from DRAM by the walk of `items`, through an LRU cache of `mb` MB of 64 KB
    K+V tiles (D 128, 128 keys): a round's items (`blocks` of them) run side by side, so their
    tiles are touched in step, tile j of every item of the round before tile j + 1."""
    capacity = int(mb * 2**20 // (128 * 256 * 2))
    lru, misses = OrderedDict(), 0
    for r in range(math.ceil(len(items) / blocks)):
        round_items = items[r * blocks:(r + 1) * blocks]
        for j in range(max(it[0] for it in round_items)):
            for tiles, seq, head, _ in round_items:
                if j >= tiles:
                    continue
                key = (seq, head // group, j)
                if key in lru:
                    lru.move_to_end(key)
                    continue
                misses += 1
                lru[key] = None
                if len(lru) > capacity:
                    lru.popitem(last=False)
    return misses * 128 * 256 * 2 / 2**20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--rows", default="128,192")
    ap.add_argument("--blocks", type=int, default=132)
    ap.add_argument("--mask", default="causal", choices=["causal", "none"])
    ap.add_argument("--block-per-item", action="store_true")
    ap.add_argument("--block-n", type=int, default=128)
    ap.add_argument("--overhead", type=float, default=3.0, help="an item's fixed cost in key tiles (block per item)")
    ap.add_argument("--varlen", help="a causal varlen batch's sequence lengths, e.g. 4096,512,2048,37,8000,1500")
    ap.add_argument("--heads", default="32/8", help="--varlen: Hq/Hkv")
    a = ap.parse_args()
    if a.varlen:
        lens = [int(x) for x in a.varlen.split(",")]
        hq, hkv = map(int, a.heads.split("/"))
        print(f"varlen {lens}, {hq}/{hkv} heads, {a.blocks} blocks: makespan / mean, (sequence, K/V head) "
              "pairs and K/V MB a round reads")
        orders = (("longest first, static walk (now)", False, False), ("FA4 sections, static walk", True, False),
                  ("FA4 sections, dynamic walk", True, True))
        for name, sections, dynamic in orders:
            m, pairs, mb = varlen_walk(varlen_items(lens, hq, sections), a.blocks, hq // hkv, dynamic)
            print(f"  {name:34s} {m:.3f}  {pairs:5.1f} pairs  {mb:6.1f} MB")
        total = sum(math.ceil(min((m + 1) * 128, n) / 128) for n in lens for m in range(math.ceil(n / 128))) * hq
        footprint = sum(math.ceil(n / 128) for n in lens) * hkv * 128 * 256 * 2 / 2**20
        print(f"K/V tiles read {total * 128 * 256 * 2 / 2**20:.0f} MB (each by every query block that sees it), "
              f"{footprint:.0f} MB distinct; from DRAM through an LRU cache of:")
        for mb in (25, 50):
            cells = [f"{misses:5.0f} MB" for misses in (l2_misses(varlen_items(lens, hq, sections), a.blocks,
                                                                  hq // hkv, mb) for _, sections, _ in orders[:2])]
            print(f"  {mb} MB: longest first {cells[0]}, FA4 sections {cells[1]}")
        return
    heads = 2048 // a.d
    if a.block_per_item:
        print("block per item: makespan / balanced time")
        for s in (1024, 2048, 4096, 8192, 16384):
            cells = []
            for order in ("grid", "sections"):
                m, section = block_per_item(s, heads, a.block_n, a.blocks, a.mask == "causal", order, a.overhead)
                cells.append(f"{order} {m:.3f}" + (f" ({section} pairs)" if order == "sections" else ""))
            print(f"S {s:5d} {a.mask}: " + "   ".join(cells))
        return
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
