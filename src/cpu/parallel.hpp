// CPU backend: the work distribution, on OpenMP's persistent thread team (the runtime keeps its
// workers between calls, so a call pays no thread start-up; a team of one is the calling thread). Workers take item indices from
// one atomic counter, so a slow item (a long causal tile) never holds up a worker's queue.
// Each worker owns its scratch memory: `make_scratch()` runs once per worker, on its thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>

namespace flashbuf::detail::cpu {

// The team for `items` work items: `requested` threads (0 = the OpenMP default, which
// OMP_NUM_THREADS sets), never more than there are items.
int resolve_thread_count(int requested, std::int64_t items);

// The size of the team that ran the last parallel_for that started one (1 when it ran on the
// calling thread alone). Lets the tests check that an explicit thread count is honoured.
int last_team_size();
void record_team_size(int threads);

int omp_team_size();      // inside a parallel region: its size
int omp_max_threads();
void set_nested_threads_to_one();  // inside a parallel region: this worker's nested teams

template <class MakeScratch, class Work>
void parallel_for_team(int team, std::int64_t items, MakeScratch& make_scratch, Work& work);

// Runs work(scratch, item) for every item in [0, items) on resolve_thread_count(threads,
// items) workers. The first exception thrown by any worker is rethrown on the calling thread
// after all workers have stopped.
template <class MakeScratch, class Work>
void parallel_for(std::int64_t items, int threads, MakeScratch make_scratch, Work work) {
  if (items <= 0) return;
  const int team = resolve_thread_count(threads, items);
  parallel_for_team(team, items, make_scratch, work);
}

template <class MakeScratch, class Work>
void parallel_for_team(int team, std::int64_t items, MakeScratch& make_scratch, Work& work) {
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
  // Always inside a parallel region, even for a team of one, and each worker's own nested
  // team size set to 1: the oneDNN products a worker calls then run on that worker's thread
  // instead of opening a team of their own per tile product.
#pragma omp parallel num_threads(team)
  {
    set_nested_threads_to_one();
#pragma omp master
    record_team_size(omp_team_size());
    worker();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace flashbuf::detail::cpu
