// Reference/test utilities: device mirrors of host tensors with guard bytes (device_mirror.hpp).
#include "reference/device_mirror.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

namespace flashbuf::reference {
namespace {
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
}  // namespace

DeviceMirror::DeviceMirror(const HostTensor& t) : bytes_(t.empty() ? 0 : t.storage_bytes()) {
  if (bytes_ == 0) return;
  cuda_check(cudaMalloc(&raw_, bytes_ + 2 * kGuard), "DeviceMirror: cudaMalloc");
  cuda_check(cudaMemset(raw_, kGuardByte, bytes_ + 2 * kGuard), "DeviceMirror: cudaMemset");
  upload(t);
}

DeviceMirror::~DeviceMirror() { cudaFree(raw_); }

void* DeviceMirror::data() const { return raw_ ? static_cast<char*>(raw_) + kGuard : nullptr; }

void DeviceMirror::upload(const HostTensor& t) const {
  if (bytes_) cuda_check(cudaMemcpy(data(), t.data(), bytes_, cudaMemcpyHostToDevice), "DeviceMirror: upload");
}

void DeviceMirror::download(HostTensor& t) const {
  if (bytes_) cuda_check(cudaMemcpy(t.data(), data(), bytes_, cudaMemcpyDeviceToHost), "DeviceMirror: download");
}

bool DeviceMirror::guards_intact() const {
  if (!bytes_) return true;
  std::vector<unsigned char> g(kGuard);
  for (std::size_t off : {std::size_t(0), kGuard + bytes_}) {
    cuda_check(cudaMemcpy(g.data(), static_cast<char*>(raw_) + off, kGuard, cudaMemcpyDeviceToHost),
               "DeviceMirror: guard download");
    for (unsigned char c : g)
      if (c != kGuardByte) return false;
  }
  return true;
}

DeviceProblem::DeviceProblem(const AttentionTensors& t)
    : q(t.q), k(t.k), v(t.v), o(t.o), lse(t.lse), cu_q(t.cu_seqlens_q), cu_k(t.cu_seqlens_k),
      seqlens_k(t.seqlens_k), page_table(t.page_table) {}

TensorPointers DeviceProblem::pointers() const {
  return {q.data(), k.data(), v.data(), o.data(), lse.data(), cu_q.data(), cu_k.data(),
          seqlens_k.data(), page_table.data()};
}

void DeviceProblem::download_outputs(AttentionTensors& t) const {
  o.download(t.o);
  if (!t.lse.empty()) lse.download(t.lse);
}

std::string DeviceProblem::guard_violations() const {
  std::string bad;
  const std::pair<const char*, const DeviceMirror*> all[] = {
      {"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}, {"lse", &lse}, {"cu_seqlens_q", &cu_q},
      {"cu_seqlens_k", &cu_k}, {"seqlens_k", &seqlens_k}, {"page_table", &page_table}};
  for (const auto& [name, m] : all)
    if (!m->guards_intact()) bad += std::string(bad.empty() ? "" : " ") + name;
  return bad;
}

}  // namespace flashbuf::reference
