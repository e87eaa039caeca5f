// Shared by the host tests that drive the CPU backend against the float64 reference: the
// reference's problem and tensor types under their short names, so the tests read as the API
// does. They live in flashbuf's anonymous namespace, where each test file keeps its helpers,
// so they stay private to the test's translation unit.
#pragma once

#include "reference/random.hpp"
#include "reference/spec.hpp"

namespace flashbuf {
namespace {

using reference::AttentionTensors;
using reference::KvLayout;
using reference::ProblemSpec;
using reference::Rng;

}  // namespace
}  // namespace flashbuf
