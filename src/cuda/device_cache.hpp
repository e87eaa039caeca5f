// Per-device caches of the CUDA backend: facts asked of the runtime once per device (an
// attribute, a kernel's occupancy, whether a kernel's code has an instruction) and kept, so
// that launches, which also run inside CUDA graph captures, make as few runtime calls as
// possible. One slot per device for the first kCachedDevices devices; on a device past them
// nothing is cached and every call asks again (correct, only slower).
//
// A slot holds 0 until the value is known, so a value that is legitimately 0 must be encoded
// (e.g. 1 for no, 2 for yes). Stores release and loads acquire: a reader that sees a slot's
// value also sees what the writer stored before it (DecodeKernelInfo's other fields, written
// before blocks_per_sm). Two threads that race on an empty slot both compute and store the
// same value; nothing is locked.
#pragma once

#include <atomic>

namespace flashbuf::detail {

inline constexpr int kCachedDevices = 64;

template <class T>
class PerDevice {
 public:
  // The slot of `device`, or nullptr for a device past the cached ones.
  std::atomic<T>* slot(int device) { return device >= 0 && device < kCachedDevices ? &slots_[device] : nullptr; }

  // The cached value of `device`, or T{} (not known yet, or not cached).
  T load(int device) {
    std::atomic<T>* const s = slot(device);
    return s != nullptr ? s->load(std::memory_order_acquire) : T{};
  }
  void store(int device, T value) {
    if (std::atomic<T>* const s = slot(device)) s->store(value, std::memory_order_release);
  }

 private:
  std::atomic<T> slots_[kCachedDevices] = {};
};

// The value of `device` in `cache`, computed by `compute()` the first time; a result of T{}
// is returned but not kept, so the next call computes again (a failed query is retried).
template <class T, class Compute>
T once_per_device(PerDevice<T>& cache, int device, Compute&& compute) {
  T value = cache.load(device);
  if (value == T{}) {
    value = compute();
    if (value != T{}) cache.store(device, value);
  }
  return value;
}

}  // namespace flashbuf::detail
