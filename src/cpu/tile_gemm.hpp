// CPU backend: the tile products of the blocked attention, run on oneDNN's matmul primitive.
// oneDNN picks its code path when the primitive is created, from the instructions this CPU
// has (AVX2, AVX-512, AVX-512 BF16, AMX): one build runs everywhere and uses what is there.
//
// A TileGemm is one fixed shape C (M x N, fp32, row-major) = A (M x K, row-major) · B, with B
// given either row-major K x N or as its transpose (N x K row-major: the K tile, for Q·Kᵀ).
// Shapes are created once and cached for the life of the process (creation costs about as
// much as thousands of runs); running one from several threads at once is safe because each
// caller passes its own scratchpad.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashbuf::detail::cpu {

enum class GemmInput { f32, bf16 };  // the type of A and B; C is fp32 either way
enum class BLayout { k_by_n, n_by_k };

class TileGemm {
 public:
  virtual ~TileGemm() = default;
  virtual std::size_t scratchpad_bytes() const = 0;
  // c = a · b; `scratchpad` holds scratchpad_bytes() (may be null when that is 0).
  virtual void run(const void* a, const void* b, float* c, void* scratchpad) const = 0;
};

// The cached primitive for this shape; throws flashbuf::RuntimeError when oneDNN cannot run
// it on this CPU (see bf16_gemm_supported()). `ldb` is the distance in elements between B's
// stored rows (0 = dense): with it the products read K and V tiles where they lie in the cache.
const TileGemm& tile_gemm(int m, int n, int k, GemmInput input, BLayout b_layout, std::int64_t ldb = 0);

// True when this CPU runs bf16 x bf16 -> fp32 products natively (AVX-512 BF16 or AMX). Where
// it does not, the bf16 backend converts tiles to fp32 instead (exact) and runs fp32 products.
bool bf16_gemm_supported();

// The CPU ceiling for `flashbuf run`: FLOP/s of the same tile products the attention runs
// (128 x 128 x 128, bf16 where bf16_gemm_supported() and `bf16` is asked, else fp32), on
// `threads` workers (0 = the default team) for about `seconds`.
double tile_gemm_ceiling_flops(bool bf16, int threads = 0, double seconds = 0.3);

}  // namespace flashbuf::detail::cpu
