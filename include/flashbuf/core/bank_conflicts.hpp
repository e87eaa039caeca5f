// Core layer: a model of NVIDIA shared-memory bank conflicts, used by the host tests to
// prove that each swizzled buffer layout is conflict-free for the accesses the kernels
// make, and available to anyone checking a new layout.
//
// Model (sm80/sm90): 32 banks, each 4 bytes wide; a warp's request is served in phases of
// 128 bytes: 32 lanes for 4-byte accesses, 16 lanes for 8-byte, 8 lanes for 16-byte
// (lanes 0-7, 8-15, ...). Within a phase, lanes reading the same 4-byte word share it (a
// broadcast); distinct words in the same bank are serialised. The conflict degree of a
// phase is the largest number of distinct words any one bank must deliver: 1 = no conflict.
#pragma once

#include <cstdint>

#include "flashbuf/core/config.hpp"

namespace flashbuf {

inline constexpr int kSmemBanks = 32;
inline constexpr int kSmemBankBytes = 4;
inline constexpr int kSmemPhaseBytes = kSmemBanks * kSmemBankBytes;  // 128

// Lanes served together for an access of `access_bytes` (4, 8 or 16) per lane.
FLASHBUF_HOST_DEVICE constexpr int smem_lanes_per_phase(int access_bytes) {
  return kSmemPhaseBytes / access_bytes;
}

// Conflict degree of one phase: `lanes` byte addresses, each accessing `access_bytes`
// (4, 8 or 16, naturally aligned), with lanes * access_bytes <= 128 (one phase; use
// bank_conflict_degree for a whole warp). Words touched by several lanes count once.
FLASHBUF_HOST_DEVICE constexpr int bank_conflict_degree_phase(const std::uint32_t* byte_addresses,
                                                              int lanes, int access_bytes) {
  constexpr int kMaxWordsPerPhase = kSmemBanks;  // 128 bytes of distinct words at most
  std::uint32_t words[kMaxWordsPerPhase] = {};
  int distinct = 0;
  const int words_per_access = access_bytes / kSmemBankBytes;
  for (int lane = 0; lane < lanes; ++lane) {
    for (int w = 0; w < words_per_access; ++w) {
      const std::uint32_t word = byte_addresses[lane] / kSmemBankBytes + w;
      bool seen = false;
      for (int j = 0; j < distinct; ++j) seen = seen || words[j] == word;
      if (!seen && distinct < kMaxWordsPerPhase) words[distinct++] = word;
    }
  }
  int degree = 0;
  for (int bank = 0; bank < kSmemBanks; ++bank) {
    int in_bank = 0;
    for (int j = 0; j < distinct; ++j) in_bank += (words[j] % kSmemBanks) == std::uint32_t(bank);
    if (in_bank > degree) degree = in_bank;
  }
  return degree;
}

// Conflict degree of a whole warp access (the worst of its phases): `lanes` (<= 32) byte
// addresses, in lane order, each of `access_bytes`.
FLASHBUF_HOST_DEVICE constexpr int bank_conflict_degree(const std::uint32_t* byte_addresses,
                                                        int lanes, int access_bytes) {
  const int phase_lanes = smem_lanes_per_phase(access_bytes);
  int worst = 0;
  for (int first = 0; first < lanes; first += phase_lanes) {
    const int n = lanes - first < phase_lanes ? lanes - first : phase_lanes;
    const int degree = bank_conflict_degree_phase(byte_addresses + first, n, access_bytes);
    if (degree > worst) worst = degree;
  }
  return worst;
}

}  // namespace flashbuf
