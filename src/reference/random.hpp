// Reference/test utilities: random numbers for test inputs. Every run draws a fresh seed
// (tests must not pass by overfitting one input) and prints it on failure, so any failure
// can be replayed with the same seed.
#pragma once

#include <cstdint>
#include <random>

namespace flashbuf::reference {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : seed_(seed), engine_(seed) {}
  // A seed from the OS entropy source mixed with the clock.
  static std::uint64_t fresh_seed();

  std::uint64_t seed() const { return seed_; }
  double normal(double mean = 0.0, double stddev = 1.0) {
    return std::normal_distribution<double>(mean, stddev)(engine_);
  }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(engine_); }
  // Uniform integer in [lo, hi].
  int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(engine_); }
  bool coin(double p_true = 0.5) { return std::bernoulli_distribution(p_true)(engine_); }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::uint64_t seed_;
  std::mt19937_64 engine_;
};

}  // namespace flashbuf::reference
