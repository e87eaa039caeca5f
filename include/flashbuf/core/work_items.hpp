// Core layer: which work items a block of a persistent grid takes, round by round. Items are
// numbered 0 .. total - 1 (the prefill's (query block, head, sequence), query blocks fastest and
// heaviest first within a head); a grid of `blocks` blocks takes them in rounds of `blocks`:
//
//   round 0:  block b -> item b
//   round 1:  block b -> item blocks + (blocks - 1 - b)      (backwards)
//   round 2:  block b -> item 2 * blocks + b                 ...
//
// Alternating direction pairs a block's heavy item (causal: early in a head) with a light one in
// the next round; and in every round the blocks work on neighbouring items, so on few heads'
// K/V at once (L2). With blocks >= total it is one item per block.
#pragma once

#include "flashbuf/core/config.hpp"

namespace flashbuf {

struct WorkItems {
  int total;   // items
  int block;   // this block, 0 .. blocks - 1
  int blocks;  // blocks in the grid

  // Round r's item of this block, or -1 past the last (every later round is past it too).
  FLASHBUF_HOST_DEVICE constexpr int at(int round) const {
    const long long item = static_cast<long long>(round) * blocks + (round & 1 ? blocks - 1 - block : block);
    return item < total ? static_cast<int>(item) : -1;
  }
};

}  // namespace flashbuf
