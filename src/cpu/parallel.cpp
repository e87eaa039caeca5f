// CPU backend: the OpenMP queries behind parallel.hpp (kept out of the header so only this
// file needs omp.h).
#include "cpu/parallel.hpp"

#include <algorithm>

#include <omp.h>

namespace flashbuf::detail::cpu {
namespace {
std::atomic<int> g_last_team_size{0};
}

int omp_team_size() { return omp_get_num_threads(); }
int omp_max_threads() { return omp_get_max_threads(); }
// The ICV lives in the worker's implicit task: it ends with the region, the caller's is untouched.
void set_nested_threads_to_one() { omp_set_num_threads(1); }

// A request is capped at 4 threads a processor (or OpenMP's own default, if larger): more only
// oversubscribe the cores, and a team of tens of thousands can fail to start, which libgomp
// answers by ending the process.
int resolve_thread_count(int requested, std::int64_t items) {
  const int cap = std::max({4 * omp_get_num_procs(), omp_get_max_threads(), 1});
  const int threads = std::min(requested > 0 ? requested : omp_get_max_threads(), cap);
  return static_cast<int>(std::clamp<std::int64_t>(items, 1, std::max(threads, 1)));
}

int last_team_size() { return g_last_team_size.load(); }
void record_team_size(int threads) { g_last_team_size.store(threads); }

}  // namespace flashbuf::detail::cpu
