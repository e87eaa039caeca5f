#include "cuda/tensor_map.hpp"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

namespace flashbuf::detail {

namespace {
// cuTensorMapEncodeTiled from the driver the runtime already loaded (no -lcuda link).
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      ptr = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }();
  return fn;
}
}  // namespace

bool make_slab_tensor_map(CUtensorMap* map, const SlabTensor& t, int box_rows, int box_heads) {
  constexpr int kSlabCols = 64;  // 128 bytes of 16-bit elements: the swizzle span
  constexpr std::int64_t kElemBytes = 2;
  const auto aligned = [](std::int64_t bytes) { return bytes % 16 == 0 && bytes > 0 && bytes < (std::int64_t(1) << 40); };
  if (reinterpret_cast<std::uintptr_t>(t.base) % 16 != 0 || !aligned(t.row_stride * kElemBytes) ||
      !aligned(t.head_stride * kElemBytes) || !aligned(t.batch_stride * kElemBytes) || t.rows <= 0 ||
      box_rows > 256 || box_heads < 1 || box_heads > 256) {
    return false;
  }
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
  if (encode == nullptr) return false;
  const cuuint64_t dims[4] = {cuuint64_t(t.cols), cuuint64_t(t.rows), cuuint64_t(t.heads), cuuint64_t(t.batch)};
  const cuuint64_t strides[3] = {cuuint64_t(t.row_stride * kElemBytes), cuuint64_t(t.head_stride * kElemBytes),
                                 cuuint64_t(t.batch_stride * kElemBytes)};
  const cuuint32_t box[4] = {kSlabCols, cuuint32_t(box_rows), cuuint32_t(box_heads), 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUresult r =
      encode(map, t.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
             const_cast<void*>(t.base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

}  // namespace flashbuf::detail
