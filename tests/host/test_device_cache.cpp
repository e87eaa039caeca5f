// Host tests of the CUDA backend's per-device cache (src/cuda/device_cache.hpp is plain C++):
// a value is computed once per device and kept, a zero result is retried, and devices past
// the cached ones (or negative) are computed every time.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "cuda/device_cache.hpp"

namespace {

using flashbuf::detail::kCachedDevices;
using flashbuf::detail::once_per_device;
using flashbuf::detail::PerDevice;

TEST(DeviceCache, ComputesOncePerDevice) {
  PerDevice<int> cache;
  int calls = 0;
  auto compute_for = [&](int device) { return [&calls, device] { ++calls; return 10 + device; }; };
  EXPECT_EQ(once_per_device(cache, 0, compute_for(0)), 10);
  EXPECT_EQ(once_per_device(cache, 0, compute_for(0)), 10);
  EXPECT_EQ(once_per_device(cache, 3, compute_for(3)), 13);
  EXPECT_EQ(once_per_device(cache, kCachedDevices - 1, compute_for(kCachedDevices - 1)), 10 + kCachedDevices - 1);
  EXPECT_EQ(once_per_device(cache, 3, compute_for(3)), 13);
  EXPECT_EQ(calls, 3) << "each cached device is computed once";
  EXPECT_EQ(cache.load(3), 13);
  EXPECT_EQ(cache.load(4), 0) << "a device never asked holds nothing";
}

TEST(DeviceCache, ZeroIsNotKept) {
  PerDevice<int> cache;
  int calls = 0;
  auto failing = [&] { ++calls; return 0; };
  EXPECT_EQ(once_per_device(cache, 1, failing), 0);
  EXPECT_EQ(once_per_device(cache, 1, failing), 0);
  EXPECT_EQ(calls, 2) << "a result of 0 (a failed query) is asked again";
  EXPECT_EQ(once_per_device(cache, 1, [] { return 2; }), 2);
  EXPECT_EQ(once_per_device(cache, 1, failing), 2) << "once known, kept";
  EXPECT_EQ(calls, 2);
}

TEST(DeviceCache, DevicesPastTheCacheAreComputedEveryTime) {
  PerDevice<bool> cache;
  int calls = 0;
  auto raise = [&] { ++calls; return true; };
  for (int device : {kCachedDevices, kCachedDevices + 7, -1}) {
    EXPECT_EQ(cache.slot(device), nullptr);
    EXPECT_TRUE(once_per_device(cache, device, raise));
    EXPECT_TRUE(once_per_device(cache, device, raise));
    cache.store(device, true);  // a no-op, not an out-of-bounds write
    EXPECT_FALSE(cache.load(device));
  }
  EXPECT_EQ(calls, 6) << "no slot aliases another device's (device 64 is not device 0)";
  EXPECT_TRUE(once_per_device(cache, 0, raise));
  EXPECT_EQ(calls, 7);
}

TEST(DeviceCache, ConcurrentFirstCallsAgree) {
  PerDevice<int> cache;
  std::vector<int> seen(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] { seen[t] = once_per_device(cache, 5, [] { return 42; }); });
  }
  for (auto& th : threads) th.join();
  for (int v : seen) EXPECT_EQ(v, 42);
  EXPECT_EQ(cache.load(5), 42);
}

}  // namespace
