// Core layer: the order of the prefill's work items. Which items a block of a persistent grid
// takes, round by round (below: the order of a grid of a block per item). Items are
// numbered 0 .. total - 1 (the prefill's (query block, head, sequence), heads and sequences
// outermost; item_coords); a grid of `blocks` blocks takes them in rounds of `blocks`:
//
//   round 0:  block b -> item b
//   round 1:  block b -> item blocks + (blocks - 1 - b)      (backwards)
//   round 2:  block b -> item 2 * blocks + b                 ...
//
// Alternating direction pairs a block's heavy item (causal: early in a head) with a light one in
// the next round; and in every round the blocks work on neighbouring items, so on few heads'
// K/V at once (L2). With blocks >= total it is one item per block. (The grid takes 128-row items,
// which this walk balances; bench/walk_model.py computes the balance.)
#pragma once

#include "flashbuf/core/config.hpp"
#include "flashbuf/core/fast_divmod.hpp"
#include "flashbuf/core/mask.hpp"

namespace flashbuf {

struct WorkItems {
  int total;   // items
  int block;   // this block, 0 .. blocks - 1
  int blocks;  // blocks in the grid

  // Round r's item of this block, or -1 past the last (every later round is past it too). A
  // grid of more blocks than items leaves blocks without work.
  FLASHBUF_HOST_DEVICE constexpr int at(int round) const {
    const long long at = static_cast<long long>(round) * blocks + (round & 1 ? blocks - 1 - block : block);
    return at < total ? static_cast<int>(at) : -1;
  }
};

// Item `item`'s coordinates: its query block counted from the last (causal: 0 the heaviest),
// head and sequence, for `m_blocks` query blocks a head; a head's blocks heaviest first.
struct ItemCoords {
  int m_from_last, head, batch;
};
FLASHBUF_HOST_DEVICE constexpr ItemCoords item_coords(int item, int m_blocks, int heads) {
  const int per_seq = m_blocks * heads;
  const int batch = item / per_seq, in_seq = item - batch * per_seq;
  const int head = in_seq / m_blocks;
  return {in_seq - head * m_blocks, head, batch};
}

// Mean key tiles (of block_n keys) per query block of block_m rows: the length of an item.
FLASHBUF_HOST_DEVICE constexpr double mean_key_tiles(const MaskParams& mask, int block_m, int block_n) {
  const int m_blocks = (mask.seqlen_q + block_m - 1) / block_m;
  if (m_blocks <= 0) return 0.0;
  long long tiles = 0;
  for (int m = 0; m < m_blocks; ++m) tiles += key_range(mask, m * block_m, (m + 1) * block_m).tiles(block_n);
  return static_cast<double>(tiles) / m_blocks;
}

// The order of a block per item's grid (query blocks x heads x sequences, a block each, handed
// to the SMs in block order as they free). The grid's own order runs one (head, sequence)
// pair's query blocks heaviest first, then the next pair's: under a causal mask the last
// pairs' heaviest blocks start when the other SMs are nearly through, and the launch ends on
// them while the rest idle. Heaviest first over every pair balances the SMs, but its blocks
// then work on many pairs' K/V at once, each tile read by few of them while the L2 holds it,
// and a key tile costs more. So the pairs go in sections of about a wave of blocks, each
// section heaviest first (every pair's last query block, then every pair's one before, ...),
// section after section; where the pairs do not divide evenly, the short section goes first,
// so that the launch ends on a whole section's light blocks. (Measured per block:
// bench/NOTES-prefill.md, "The causal grid's order".)
// A block counts the grid's blocks, query blocks fastest; pairs = heads x sequences, a pair
// head + heads * sequence. The divisors are made once per launch on the host (FastDivmod), so
// that a kernel's block finds its item, and the pair's head and sequence, with
// multiplications: integer divisions by launch values, at every block's start and again where
// its epilogue finds the block anew, were a measurable part of a short item's time
// (bench/NOTES-prefill.md, "An item's fixed cost, step by step"). Sections of one pair are the
// grid's own order, which a kernel reads from blockIdx instead (on() false).
struct GridItem {
  int m_from_last, pair;
};
struct SectionOrder {
  int lead = 0;         // pairs of the short section, which runs first (pairs % section)
  int lead_blocks = 0;  // its blocks: lead x query blocks
  FastDivmod section_blocks, section_pairs, lead_pairs, heads;

  SectionOrder() = default;
  // `section` pairs a section (0 or 1: the grid's own order); `heads`: the grid's, of which
  // pairs = heads x sequences.
  FLASHBUF_HOST_DEVICE constexpr SectionOrder(int section, int m_blocks, int pairs, int heads)
      : lead(section > 1 ? pairs % section : 0),
        lead_blocks(lead * m_blocks),
        section_blocks((section > 1 ? section : 1) * m_blocks),
        section_pairs(section),
        lead_pairs(lead),
        heads(heads) {}
  FLASHBUF_HOST_DEVICE constexpr bool on() const { return section_pairs.divisor > 1; }
  FLASHBUF_HOST_DEVICE constexpr GridItem item(int block) const {
    if (block < lead_blocks) {
      const int rank = lead_pairs.div(block);
      return {rank, block - rank * lead};
    }
    const int section = section_pairs.divisor;
    const int after_lead = block - lead_blocks;
    const int whole = section_blocks.div(after_lead);  // whole sections before this block's
    const int in_section = after_lead - whole * section_blocks.divisor;
    const int rank = section_pairs.div(in_section);
    return {rank, lead + whole * section + in_section - rank * section};
  }
};

// The pairs of a section of SectionOrder: as many as make about one wave of blocks
// (`wave`: as many as the device runs at once), at most `pairs`; 0 (the grid's own order, as
// sections of one pair are) where that is one pair, where every query block of a pair sees as
// many keys (no right bound on a row's keys), or where the grid's blocks do not fit an int.
FLASHBUF_HOST_DEVICE constexpr int longest_first_section(const MaskParams& mask, int m_blocks, long long pairs,
                                                         int wave) {
  if (!mask.has_right_bound() || pairs <= 0 || m_blocks <= 0 || pairs * m_blocks > 0x7fffffffLL) return 0;
  const long long section = (wave + m_blocks / 2) / m_blocks;
  return section <= 1 ? 0 : static_cast<int>(section < pairs ? section : pairs);
}

// Whether a persistent grid beats a block per item whose blocks have `block_consumers`
// consumer warpgroups. It saves each item's fixed cost (block start, Q and the first K/V in
// flight before the first product, the epilogue alone on the SM), but its Q slots leave fewer
// K+V stages and its static walk cannot balance long causal items, so it wins on short items
// and loses beyond a length that depends on the block per item it stands against:
//   - head dims up to 128 (128 x 128 tiles either way): about 17 key tiles an item (causal S 4k);
//     at 32 (S 4k) and 32.5 (causal S 8k) the block per item leads;
//   - D 256 (a block per item of 80-key tiles against the walk's 64, one Q slot): about 33;
//   - D 192 (widest head dim between 128 and 256; its block per item has 80- or, at Dv 128,
//     128-key tiles, the persistent grid two 64-key stages beside two 48 KB Q slots): about 12
//     (fit with the 80-key block);
//   - a block per item of one consumer (D 64: 64 query rows, two blocks per SM) loses to the
//     persistent grid's two at every length.
// (The measurements the thresholds are fit to: bench/NOTES-prefill.md, "Measurements behind the
// code's choices".)
FLASHBUF_HOST_DEVICE constexpr bool persistent_grid_pays(double mean_tiles_per_item, int block_consumers,
                                                         int widest_head_dim) {
  const double max_tiles = widest_head_dim <= 128 ? 17.0 : widest_head_dim < 256 ? 12.0 : 33.0;
  return block_consumers == 1 || mean_tiles_per_item <= max_tiles;
}

// Whether D 64 takes three consumer warpgroups over 192-row items, a block each, rather than the
// persistent grid's two over 128 (its exponentials take about as many cycles as its products, so
// the more warpgroups take turns the more of either hides under the other; a block per item
// lets the hardware hand the next item to whichever SM frees first, where a static walk's last
// rounds leave SMs idle). Three pay without a mask on long items, and on causal ones only longer
// still. The rule is fit to the measured points (bench/NOTES-prefill.md, "Measurements behind
// the code's choices"), and kept where they say something:
//   - no left bound on a row's keys; items of >= 16 key tiles (S >= 2k at 128-key tiles;
//     `mean_tiles_per_item` is of the two-consumer items, mean_key_tiles at 128 rows), and with
//     a right bound >= 32 (causal S >= ~8k; a right window bound alone is ruled as causal, not
//     measured on its own);
//   - at least 4 waves of items (items of `block_m` rows over `heads_x_batch` (head, sequence)
//     pairs, `wave` blocks a wave): below, each SM runs one item either way, and a 192-row item
//     is one and a half times a 128-row one's work;
//   - the last item padded by at most 1/16 of the query rows.
FLASHBUF_HOST_DEVICE constexpr bool three_consumers_pay(const MaskParams& mask, double mean_tiles_per_item, int block_m,
                                                        long long heads_x_batch, int wave) {
  const long long items = ceil_div(mask.seqlen_q, block_m) * heads_x_batch;
  const int padding = round_up(mask.seqlen_q, block_m) - mask.seqlen_q;
  if (mask.has_left_bound()) return false;
  const double min_tiles = mask.has_right_bound() ? 32.0 : 16.0;
  return mean_tiles_per_item >= min_tiles && items >= 4LL * wave && 16 * padding <= mask.seqlen_q;
}

}  // namespace flashbuf
