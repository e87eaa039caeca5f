// buffers: KBufferConfig and VBufferConfig — the seed's KVBufferConfig models.
//
//   K: BN keys x BK head-dim columns in shared memory; S = Q K^T walks the head dim
//      (kMmaKSteps = BK / 16) and each warp covers all BN keys (MMA N = keys).
//   V: BK keys x depth columns; O += P V walks the keys (kMmaKSteps = BK / 16) and a warp
//      covers depth in chunks of WN columns (MMA N = head dim of V).
#pragma once

#include "flashbuf/buffers/concepts.cuh"

namespace flashbuf {

template <int BN, int BK, int WN>
struct KBufferConfig {
  static_assert(BN % 16 == 0 && BK % 16 == 0, "KBufferConfig: BN and BK are multiples of 16");
  static_assert(WN == BN, "KBufferConfig: a warp reads every key of the tile");
  static constexpr int kRows = BN;
  static constexpr int kCols = BK;
  static constexpr int kWarpTileN = WN;
  static constexpr int kMmaKSteps = BK / 16;
  static constexpr IteratorAxis kIteratorAxis = IteratorAxis::head_dim;
  static constexpr int wtile_coord(int chunk) { return chunk * WN; }
};

template <int BN, int BK, int WN, int Depth>
struct VBufferConfig {
  static_assert(BK % 16 == 0 && Depth % 16 == 0, "VBufferConfig: BK and depth are multiples of 16");
  static_assert(Depth % WN == 0 && WN % 16 == 0, "VBufferConfig: WN divides depth, multiple of 16");
  static constexpr int kRows = BK;
  static constexpr int kCols = Depth;
  static constexpr int kWarpTileN = WN;
  static constexpr int kMmaKSteps = BK / 16;
  static constexpr int kChunks = Depth / WN;
  static constexpr IteratorAxis kIteratorAxis = IteratorAxis::keys;
  static constexpr int wtile_coord(int chunk) { return chunk * WN; }
};

static_assert(KVBufferConfig<KBufferConfig<64, 128, 64>>);
static_assert(KVBufferConfig<VBufferConfig<64, 64, 64, 128>>);

}  // namespace flashbuf
