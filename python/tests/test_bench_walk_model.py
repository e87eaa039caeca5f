"""bench/walk_model.py's L2 model on made-up walks: an LRU cache that holds every tile reads each
tile from DRAM once; one too small for a round's tiles reads them again in the next round, and
an order that finishes one (sequence, K/V head) pair before the next reads each tile once."""
import bench_scripts

TILE_MB = 128 * 256 * 2 / 2**20  # a K+V tile of 128 keys at D 128


def items_of(pairs, query_blocks, tiles):
    """`query_blocks` items per (sequence, head) pair, each reading `tiles` key tiles; pair-major."""
    return [(tiles, seq, 0, m) for seq in range(pairs) for m in range(query_blocks)]


def test_l2_misses_count_each_tile_once_when_it_fits():
    model = bench_scripts.load("walk_model")
    walk = items_of(pairs=4, query_blocks=3, tiles=8)
    assert model.l2_misses(walk, blocks=4, group=1, mb=50) == 4 * 8 * TILE_MB


def test_l2_misses_reread_what_a_small_cache_lost_and_locality_avoids_it():
    model = bench_scripts.load("walk_model")
    small = 16 * TILE_MB  # 16 tiles: less than one round's 4 pairs x 8 tiles
    interleaved = [(8, seq, 0, m) for m in range(3) for seq in range(4)]  # a round: every pair
    assert model.l2_misses(interleaved, blocks=4, group=1, mb=small) == 3 * 4 * 8 * TILE_MB
    pair_major = items_of(pairs=4, query_blocks=4, tiles=8)  # a round: one pair's query blocks
    assert model.l2_misses(pair_major, blocks=4, group=1, mb=small) == 4 * 8 * TILE_MB
