// Which device code a build compiled, from its architecture list as FLASHBUF_BUILD_ARCHS spells
// it (FLASHBUF_CUDA_ARCHS, space-separated: "90a 80", "90a-real", "80"). The Hopper prefill
// kernels (wgmma, TMA, setmaxnreg) exist only in sm_90a code; an sm_90 image, or sm_80 PTX that
// the driver compiles for a Hopper device, holds them as traps (arch/sm90/target.cuh). The
// runtime reports binary version 90 for all three, so the list decides: sm_90a compiled, and no
// plain sm_90 image beside it that the driver might load instead. A list it cannot read (CMake's
// "native", "all") counts as no sm_90a, and prefill takes the mma.sync kernels.
#pragma once

#include <string_view>

namespace flashbuf::detail {

constexpr bool archs_hold_sm90a(std::string_view archs) {
  bool sm90a = false, plain_sm90 = false;
  while (!archs.empty()) {
    const std::size_t space = archs.find(' ');
    const std::string_view entry = archs.substr(0, space);
    archs = space == std::string_view::npos ? std::string_view{} : archs.substr(space + 1);
    const std::string_view arch = entry.substr(0, entry.find('-'));  // "90a-real" -> "90a"
    if (arch == "90a") sm90a = true;
    if (arch == "90") plain_sm90 = true;
  }
  return sm90a && !plain_sm90;
}

}  // namespace flashbuf::detail
