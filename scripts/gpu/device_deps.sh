#!/usr/bin/env bash
# The build's Debian dependencies for a machine that cannot install packages (the GPU machine
# has no network): oneDNN (the CPU backend's tile products) with the OpenCL loader it links,
# and the command line's header-only CLI11 and nlohmann/json. Download them here, carry
# .deps/debs (the device tool's `carry`), unpack them there:
#
#   here:   scripts/gpu/device_deps.sh download       # .deps/debs/*.deb, about 7.5 MB
#   there:  source scripts/gpu/device_deps.sh unpack  # ~/.flashbuf-deps; exports the search paths
#
# After `unpack`, CMake finds the packages through CMAKE_PREFIX_PATH and the loader finds
# libdnnl.so.2 through LD_LIBRARY_PATH. Packages the machine has already are left alone. They
# are unpacked outside the checkout, in the home folder, which outlives a call while the machine
# stays warm: a later call there need not carry .deps again (its 7.5 MB of the 64 MiB carry go to
# FlashAttention-4's parts instead, scripts/gpu/fa4_site.sh), and `unpack` finds them there.
DEPS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPS="$DEPS_ROOT/.deps"
DEPS_UNPACKED="${FLASHBUF_DEPS_DIR:-$HOME/.flashbuf-deps}"
case "${1:-}" in
  download)
    mkdir -p "$DEPS/debs"
    (cd "$DEPS/debs" && apt-get download libdnnl2 libdnnl-dev ocl-icd-libopencl1 libcli11-dev nlohmann-json3-dev)
    ls -l "$DEPS/debs"
    ;;
  unpack)
    if ls "$DEPS"/debs/*.deb >/dev/null 2>&1; then
      mkdir -p "$DEPS_UNPACKED"
      for deb in "$DEPS"/debs/*.deb; do dpkg -x "$deb" "$DEPS_UNPACKED"; done
      echo "device_deps: unpacked $(ls "$DEPS"/debs/*.deb | wc -l) packages into $DEPS_UNPACKED" >&2
    elif [ -d "$DEPS_UNPACKED/usr" ]; then
      echo "device_deps: no .deps/debs carried; the packages an earlier call unpacked, $DEPS_UNPACKED" >&2
    else
      echo "device_deps: no .deps/debs carried; using the machine's own packages" >&2
    fi
    if [ -d "$DEPS_UNPACKED/usr" ]; then
      export CMAKE_PREFIX_PATH="$DEPS_UNPACKED/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
      export LD_LIBRARY_PATH="$DEPS_UNPACKED/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    ;;
  *)
    echo "usage: $0 download | source $0 unpack" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
