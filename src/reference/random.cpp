// Reference/test utilities: fresh seeds (see random.hpp).
#include "reference/random.hpp"

#include <chrono>

namespace flashbuf::reference {

std::uint64_t Rng::fresh_seed() {
  std::random_device device;
  const std::uint64_t entropy = (std::uint64_t(device()) << 32) ^ device();
  const auto now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  // splitmix64 finaliser: spreads the clock bits over the whole word.
  std::uint64_t z = entropy ^ (now + 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace flashbuf::reference
