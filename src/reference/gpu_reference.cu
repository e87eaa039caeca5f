// Reference/test utilities: the naive attention on the device (gpu_reference.hpp). One block
// of kThreads threads per query row: the row's visible keys are a contiguous range (the mask is
// a band), walked twice: once for the row max, then in chunks of kThreads keys, each thread
// computing one key's probability into shared memory and then one output column's sum over
// the chunk, in key order. The lowp form keeps the host reference's order of operations (a
// sequential fp32 dot product, the row sum added in key order by one thread, P rounded to the
// input dtype) and uses __fmul_rn / __fadd_rn so nothing is contracted into an FMA.
#include "reference/gpu_reference.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace flashbuf::reference {
namespace {

constexpr int kThreads = 256;  // >= every head_dim_v: one output column per thread
constexpr int kMaxHeadDim = 512;

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("gpu reference: ") + what + ": " + cudaGetErrorString(e));
}

// An owning device array.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n, const T* host = nullptr) : n_(n) {
    if (n_ == 0) return;
    cuda_check(cudaMalloc(&ptr_, n_ * sizeof(T)), "cudaMalloc");
    if (host) cuda_check(cudaMemcpy(ptr_, host, n_ * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return ptr_; }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    if (n_) cuda_check(cudaMemcpy(h.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return h;
  }

 private:
  std::size_t n_;
  T* ptr_ = nullptr;
};

// One query row: where its q elements are, its sequence's lengths, its output slot.
struct RowTask {
  int b, h, i, sq, sk;
  std::int64_t q_offset;
};

struct Params {
  const void *q, *k, *v;
  DType dtype;
  int head_dim, head_dim_v, group;
  KvLayout kv;
  std::int64_t k_stride[4], v_stride[4];  // HostTensor strides, elements
  const std::int64_t* k_row_start;        // varlen: first key row of each sequence
  const std::int32_t* page_table;
  int page_cols, page_size;
  int window_left, window_right;           // -1 = unbounded (causal: -1, 0)
  double scale;
  float softcap;
  const RowTask* rows;
  double* o;    // (row task, head_dim_v)
  double* lse;  // (row task)
};

__device__ float load(const void* base, DType dtype, std::int64_t at) {
  switch (dtype) {
    case DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[at]);
    case DType::fp16: return __half2float(static_cast<const __half*>(base)[at]);
    default: return static_cast<const float*>(base)[at];
  }
}

__device__ float round_to(DType dtype, float x) {
  switch (dtype) {
    case DType::bf16: return __bfloat162float(__float2bfloat16_rn(x));
    case DType::fp16: return __half2float(__float2half_rn(x));
    default: return x;
  }
}

// Storage offset of key row j of sequence b, kv head hk, in a tensor of `stride`.
__device__ std::int64_t kv_offset(const Params& p, const std::int64_t* stride, int b, int j, int hk) {
  switch (p.kv) {
    case KvLayout::batch: return b * stride[0] + j * stride[1] + hk * stride[2];
    case KvLayout::varlen: return (p.k_row_start[b] + j) * stride[0] + hk * stride[1];
    case KvLayout::paged: {
      const std::int64_t page = p.page_table[std::int64_t(b) * p.page_cols + j / p.page_size];
      return page * stride[0] + (j % p.page_size) * stride[1] + hk * stride[2];
    }
  }
  return 0;
}

// The row's score for key j, in Acc (double or float) as reference.cpp computes it.
template <class Acc>
__device__ Acc score(const Params& p, const Acc* q, int b, int j, int hk) {
  const std::int64_t ko = kv_offset(p, p.k_stride, b, j, hk);
  if constexpr (sizeof(Acc) == 8) {
    double dot = 0.0;
    for (int d = 0; d < p.head_dim; ++d) dot += q[d] * double(load(p.k, p.dtype, ko + d));
    double x = dot * p.scale;
    if (p.softcap > 0) x = double(p.softcap) * tanh(x / double(p.softcap));
    return x;
  } else {
    float dot = 0.0f;
    for (int d = 0; d < p.head_dim; ++d) dot = __fadd_rn(dot, __fmul_rn(q[d], load(p.k, p.dtype, ko + d)));
    float x = __fmul_rn(dot, static_cast<float>(p.scale));
    if (p.softcap > 0) x = __fmul_rn(p.softcap, tanhf(__fdiv_rn(x, p.softcap)));
    return x;
  }
}

// std::max's choice (a < b ? b : a): a NaN score never becomes the max, as on the host.
template <class Acc>
__device__ Acc max_of(Acc a, Acc b) { return a < b ? b : a; }

template <class Acc>
__global__ void __launch_bounds__(kThreads) reference_rows_kernel(Params p) {
  __shared__ Acc q[kMaxHeadDim];
  __shared__ Acc red[kThreads];
  __shared__ Acc prob[kThreads];
  __shared__ Acc row_sum;
  const RowTask r = p.rows[blockIdx.x];
  const int tid = threadIdx.x;
  const int hk = r.h / p.group;
  // The visible keys [lo, hi]: bottom-right aligned band (reference.cpp's `sees`).
  const long diag = long(r.i) + r.sk - r.sq;
  long lo = 0, hi = long(r.sk) - 1;
  if (p.window_left >= 0) lo = lo > diag - p.window_left ? lo : diag - p.window_left;
  if (p.window_right >= 0) hi = hi < diag + p.window_right ? hi : diag + p.window_right;
  double* o = p.o + std::int64_t(blockIdx.x) * p.head_dim_v;
  if (lo > hi) {
    for (int d = tid; d < p.head_dim_v; d += kThreads) o[d] = 0.0;
    if (tid == 0) p.lse[blockIdx.x] = -INFINITY;
    return;
  }
  for (int d = tid; d < p.head_dim; d += kThreads) q[d] = Acc(load(p.q, p.dtype, r.q_offset + d));
  __syncthreads();

  Acc m = -INFINITY;
  for (long j = lo + tid; j <= hi; j += kThreads) m = max_of(m, score<Acc>(p, q, r.b, int(j), hk));
  red[tid] = m;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (tid < w) red[tid] = max_of(red[tid], red[tid + w]);
    __syncthreads();
  }
  m = red[0];

  Acc acc = 0;
  if (tid == 0) row_sum = 0;
  for (long base = lo; base <= hi; base += kThreads) {
    const long j = base + tid;
    const int n = int((hi - base + 1) < kThreads ? hi - base + 1 : kThreads);
    Acc pj = 0;
    if (j <= hi) {
      if constexpr (sizeof(Acc) == 8) pj = exp(score<Acc>(p, q, r.b, int(j), hk) - m);
      else pj = expf(__fsub_rn(score<Acc>(p, q, r.b, int(j), hk), m));
    }
    prob[tid] = pj;
    __syncthreads();
    if (tid == 0) {
      Acc s = row_sum;
      for (int x = 0; x < n; ++x) {
        if constexpr (sizeof(Acc) == 8) s += prob[x];
        else s = __fadd_rn(s, prob[x]);
      }
      row_sum = s;
    }
    if (tid < p.head_dim_v) {
      for (int x = 0; x < n; ++x) {
        const std::int64_t vo = kv_offset(p, p.v_stride, r.b, int(base + x), hk);
        if constexpr (sizeof(Acc) == 8) {
          acc += prob[x] * double(load(p.v, p.dtype, vo + tid));
        } else {
          acc = __fadd_rn(acc, __fmul_rn(round_to(p.dtype, prob[x]), load(p.v, p.dtype, vo + tid)));
        }
      }
    }
    __syncthreads();
  }
  const Acc sum = row_sum;
  if (tid < p.head_dim_v) {
    if constexpr (sizeof(Acc) == 8) o[tid] = acc / sum;
    else o[tid] = double(round_to(p.dtype, __fdiv_rn(acc, sum)));
  }
  if (tid == 0) {
    if constexpr (sizeof(Acc) == 8) p.lse[blockIdx.x] = m + log(sum);
    else p.lse[blockIdx.x] = double(__fadd_rn(m, logf(sum)));
  }
}

}  // namespace

DeviceReferences gpu_reference_attention(const ProblemSpec& spec, const AttentionTensors& t,
                                         const std::vector<RowId>& rows) {
  spec.check();
  if (spec.head_dim > kMaxHeadDim || spec.head_dim_v > kThreads)
    throw std::invalid_argument("gpu reference: head dims up to " + std::to_string(kMaxHeadDim) + " / " +
                                std::to_string(kThreads));
  const std::int64_t Tq = spec.total_q();
  DeviceReferences out;
  for (RowResults* r : {&out.float64, &out.lowp}) {
    r->o.assign(static_cast<std::size_t>(Tq * spec.heads_q * spec.head_dim_v), 0.0);
    r->lse.assign(static_cast<std::size_t>(Tq * spec.heads_q), 0.0);
  }
  if (rows.empty()) return out;

  std::vector<RowTask> tasks;
  tasks.reserve(rows.size());
  for (const RowId& id : rows) {
    const std::int64_t qo = spec.varlen_q ? t.q.offset({spec.q_row(id.b, id.i), id.h, 0}) : t.q.offset({id.b, id.i, id.h, 0});
    tasks.push_back({id.b, id.h, id.i, spec.q_len(id.b), spec.k_len(id.b), qo});
  }
  std::vector<std::int64_t> k_row_start(static_cast<std::size_t>(spec.batch) + 1, 0);
  for (int b = 0; b < spec.batch; ++b) k_row_start[b + 1] = k_row_start[b] + spec.k_len(b);

  DeviceArray<unsigned char> q(t.q.storage_bytes(), static_cast<const unsigned char*>(t.q.data()));
  DeviceArray<unsigned char> k(t.k.storage_bytes(), static_cast<const unsigned char*>(t.k.data()));
  DeviceArray<unsigned char> v(t.v.storage_bytes(), static_cast<const unsigned char*>(t.v.data()));
  DeviceArray<std::int64_t> starts(k_row_start.size(), k_row_start.data());
  const bool paged = spec.kv == KvLayout::paged;
  DeviceArray<std::int32_t> table(paged ? static_cast<std::size_t>(t.page_table.numel()) : 0,
                                  paged ? t.page_table.i32() : nullptr);
  DeviceArray<RowTask> task_array(tasks.size(), tasks.data());

  Params p{};
  p.q = q.get();
  p.k = k.get();
  p.v = v.get();
  p.dtype = spec.dtype;
  p.head_dim = spec.head_dim;
  p.head_dim_v = spec.head_dim_v;
  p.group = spec.heads_q / spec.heads_kv;
  p.kv = spec.kv;
  for (int d = 0; d < t.k.rank(); ++d) p.k_stride[d] = t.k.strides()[d];
  for (int d = 0; d < t.v.rank(); ++d) p.v_stride[d] = t.v.strides()[d];
  p.k_row_start = starts.get();
  p.page_table = table.get();
  p.page_cols = paged ? static_cast<int>(t.page_table.shape()[1]) : 0;
  p.page_size = spec.page_size;
  p.window_left = spec.mask.kind == MaskKind::sliding_window ? spec.mask.window_left : -1;
  p.window_right = spec.mask.kind == MaskKind::causal           ? 0
                   : spec.mask.kind == MaskKind::sliding_window ? spec.mask.window_right
                                                                : -1;
  p.scale = spec.scale();
  p.softcap = spec.softcap;
  p.rows = task_array.get();

  const std::size_t n = tasks.size();
  for (const bool lowp : {false, true}) {
    DeviceArray<double> o(n * spec.head_dim_v), lse(n);
    p.o = o.get();
    p.lse = lse.get();
    // gridDim.x holds up to 2^31 - 1 blocks; launch in pieces well below that.
    constexpr std::size_t kMaxBlocks = std::size_t(1) << 30;
    for (std::size_t first = 0; first < n; first += kMaxBlocks) {
      Params piece = p;
      piece.rows += first;
      piece.o += first * spec.head_dim_v;
      piece.lse += first;
      const unsigned blocks = static_cast<unsigned>(std::min(kMaxBlocks, n - first));
      if (lowp) reference_rows_kernel<float><<<blocks, kThreads>>>(piece);
      else reference_rows_kernel<double><<<blocks, kThreads>>>(piece);
      cuda_check(cudaGetLastError(), "launch");
    }
    cuda_check(cudaDeviceSynchronize(), "kernel");
    const std::vector<double> ho = o.download(), hl = lse.download();
    RowResults& r = lowp ? out.lowp : out.float64;
    for (std::size_t x = 0; x < n; ++x) {
      const RowId& id = rows[x];
      const std::int64_t at = spec.q_row(id.b, id.i) * spec.heads_q + id.h;
      std::copy(ho.begin() + x * spec.head_dim_v, ho.begin() + (x + 1) * spec.head_dim_v,
                r.o.begin() + at * spec.head_dim_v);
      r.lse[at] = hl[x];
    }
  }
  return out;
}

AttentionCheck gpu_check_attention(const ProblemSpec& spec, const AttentionTensors& t,
                                   const std::vector<RowId>* rows) {
  const std::vector<RowId> every = rows ? std::vector<RowId>{} : all_rows(spec);
  const DeviceReferences r = gpu_reference_attention(spec, t, rows ? *rows : every);
  return check_attention_against(spec, t, rows, r.float64, r.lowp);
}

}  // namespace flashbuf::reference
