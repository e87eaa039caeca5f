// CPU backend: the work distribution. A fixed set of std::thread workers (one per hardware
// thread, never more than there are items) take item indices from one atomic counter, so a
// slow item (a long causal tile) never holds up a worker's queue. Each worker owns its
// scratch memory: `make_scratch()` runs once per worker, on that worker's thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace flashbuf::detail::cpu {

inline int worker_count(std::int64_t items) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min<std::int64_t>(hw, std::max<std::int64_t>(items, 1)));
}

// Runs work(scratch, item) for every item in [0, items). The first exception thrown by any
// worker is rethrown on the calling thread after all workers have stopped.
template <class MakeScratch, class Work>
void parallel_for(std::int64_t items, MakeScratch make_scratch, Work work) {
  if (items <= 0) return;
  std::atomic<std::int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    try {
      auto scratch = make_scratch();
      for (std::int64_t item = next.fetch_add(1); item < items; item = next.fetch_add(1)) {
        work(scratch, item);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next.store(items);  // stop the others early
    }
  };
  const int workers = worker_count(items);
  if (workers == 1) {
    worker();  // no thread start-up for small problems (decode, tests)
  } else {
    std::vector<std::thread> threads;
    threads.reserve(workers - 1);
    for (int i = 0; i + 1 < workers; ++i) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace flashbuf::detail::cpu
