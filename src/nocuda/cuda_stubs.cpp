// The CUDA entry points of src/api/backends.hpp for builds without nvcc. Discovery answers
// "no GPU"; everything that would run on a GPU throws a RuntimeError saying why, so the API
// layer compiles and behaves the same whether CUDA was switched off or not found.
#include <string>

#include "api/backends.hpp"

namespace flashbuf::detail {
namespace {

[[noreturn]] void no_cuda(const char* what) {
  // FLASHBUF_NO_CUDA_REASON: set by CMakeLists.txt (switched off, or no nvcc found).
  throw RuntimeError(std::string("flashbuf was built without CUDA (") + FLASHBUF_NO_CUDA_REASON + "), so " +
                     what + " cannot run; use CPU tensors, or rebuild with CUDA (-DFLASHBUF_ENABLE_CUDA=ON)");
}

}  // namespace

bool cuda_runtime_available() { return false; }

DeviceInfo cuda_query_device(int /*device_index*/) { no_cuda("cuda_device_info"); }

bool cuda_pointer_on_device(const void* /*ptr*/, int* /*device_index*/) { return false; }

bool prefill_instantiated(DType, int, int) { return false; }

bool decode_instantiated(DType, int) { return false; }

void sm80_attention(const AttentionProblem&) { no_cuda("attention on CUDA tensors"); }

bool sm90_prefill_available(int) { return false; }

void sm90_attention(const AttentionProblem&) { no_cuda("attention on CUDA tensors"); }

void cuda_plan_decode(const DecodeProblem&, DecodePlan&) { no_cuda("plan_decode for a CUDA device"); }

void cuda_decode(const DecodePlan&, const AttentionProblem&, void*) { no_cuda("decode on CUDA tensors"); }

void cuda_merge_states(const MergeProblem&) { no_cuda("merge_states on CUDA tensors"); }

void cuda_append_kv(const AppendProblem&) { no_cuda("append_kv on CUDA tensors"); }

bool cuda_copy_rows_to_host_if_not_capturing(void*, const void*, std::size_t, std::size_t, std::size_t, void*) {
  no_cuda("reading CUDA index tensors");
}

}  // namespace flashbuf::detail
