// Reference/test utilities: the seeded fuzz campaign's cases (tests/host/test_fuzz_cpu.cpp on
// the CPU backend, tests/gpu/test_fuzz.cu on the GPU kernels). A case is a function of its
// index and its seed alone: the index fixes what every run must cover (the entry point, the
// head dims in turn), the seed draws everything else (batch, lengths with Sq != Sk and
// zero-length sequences, GQA ratio 1-8, layout: batch, seqlens_k, varlen, paged with pages of
// 1-256 keys, mask, softcap, scale, strided views, LSE, NaN in the cache rows no query may
// read). Inputs are finite everywhere a row reads; the NaN rule has tests of its own.
//
//   FLASHBUF_FUZZ_SEED=<n>  replays a run: every case's seed derives from it (fuzz_case_seed).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "reference/spec.hpp"

namespace flashbuf::reference {

enum class FuzzEntry { prefill, decode, merge };
const char* fuzz_entry_name(FuzzEntry entry);

// What a side can run, and how big its cases may be.
struct FuzzLimits {
  std::vector<std::pair<int, int>> head_dims;  // prefill (head_dim, head_dim_v)
  std::vector<int> decode_head_dims;           // decode: head_dim == head_dim_v
  std::vector<DType> dtypes;
  int max_batch = 3;
  int max_seqlen_q = 40;
  int max_seqlen_k = 80;
  int max_heads_kv = 4;
  int max_decode_keys = 100;
};

struct FuzzCase {
  int index = 0;
  std::uint64_t seed = 0;
  FuzzEntry entry = FuzzEntry::prefill;
  ProblemSpec spec;
  // K/V rows no query may read (past a sequence's seqlens_k, pool pages and page-table
  // padding entries) hold NaN (poison_unused_kv_rows): a read of one shows in O.
  bool nan_in_unused_rows = false;
  // merge: the keys split into parts [merge_bounds[p], merge_bounds[p + 1]); some may be empty.
  std::vector<int> merge_bounds;
  int merge_parts() const { return merge_bounds.empty() ? 0 : int(merge_bounds.size()) - 1; }
  // "fuzz case 17 (seed 0x...): decode bf16 B=2 ...; NaN in unused rows"
  std::string describe() const;
};

// The run's base seed: `replay` (a number, as a run printed it) when given and not empty, else
// fresh. The test binaries pass FLASHBUF_FUZZ_SEED; this library reads no environment.
std::uint64_t fuzz_base_seed(const char* replay);
// Case `index`'s seed in a run of `base` (a splitmix64 step: neighbouring indices differ).
std::uint64_t fuzz_case_seed(std::uint64_t base, int index);

FuzzCase make_fuzz_case(int index, std::uint64_t seed, const FuzzLimits& limits);

// NaN in every K/V row no query reads: rows at or past seqlens_k in batch-form caches; in a
// paged pool every row that holds no key (the tail of a sequence's last page, spare pages),
// with the page table's padding entries pointed at a spare page (validation requires them to
// be in range once read, and a kernel that read one would meet NaN). No-op for other layouts.
void poison_unused_kv_rows(const ProblemSpec& spec, AttentionTensors& t);

// Every head's K and V at (outer, row) := NaN; outer is the sequence (batch form) or the page.
void poison_kv_row(const ProblemSpec& spec, AttentionTensors& t, std::int64_t outer, std::int64_t row);

}  // namespace flashbuf::reference
