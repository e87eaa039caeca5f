#!/usr/bin/env bash
# GPU machine: the decode timeline tool (bench/trace_decode.cu) of one source tree, built with
# the library's bf16 D 128 units only (sm_90a): flashbuf_trace_decode and its unstamped twin
# flashbuf_trace_decode_unstamped in BUILD. The tree's dependencies must be unpacked first
# (scripts/gpu/device_deps.sh unpack).
#   scripts/gpu/trace_decode_build.sh SRC BUILD [JOBS, default 16]
set -euo pipefail
src=$1 build=$2 jobs=${3:-16}
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHBUF_ENABLE_CUDA=ON -DFLASHBUF_CUDA_ARCHS=90a \
  -DFLASHBUF_BUILD_PYTHON=OFF -DFLASHBUF_BUILD_TESTS=OFF -DFLASHBUF_BUILD_TOOLS=OFF -DFLASHBUF_BUILD_TUNER=ON \
  -DFLASHBUF_INSTANTIATIONS=bf16_128_128 -DFLASHBUF_DECODE_INSTANTIATIONS=bf16_128 >/dev/null
cmake --build "$build" -j"$jobs" --target flashbuf_trace_decode flashbuf_trace_decode_unstamped >/dev/null
