#!/usr/bin/env bash
# The build's Debian dependencies for a machine that cannot install packages (the GPU machine
# has no network): oneDNN (the CPU backend's tile products) with the OpenCL loader it links,
# and the command line's header-only CLI11 and nlohmann/json. Download them here, carry
# .deps/debs (the device tool's `carry`), unpack them there:
#
#   here:   scripts/gpu/device_deps.sh download       # .deps/debs/*.deb, about 7.5 MB
#   there:  source scripts/gpu/device_deps.sh unpack  # .deps/root; exports the search paths
#
# After `unpack`, CMake finds the packages through CMAKE_PREFIX_PATH and the loader finds
# libdnnl.so.2 through LD_LIBRARY_PATH. Packages the machine has already are left alone.
DEPS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPS="$DEPS_ROOT/.deps"
case "${1:-}" in
  download)
    mkdir -p "$DEPS/debs"
    (cd "$DEPS/debs" && apt-get download libdnnl2 libdnnl-dev ocl-icd-libopencl1 libcli11-dev nlohmann-json3-dev)
    ls -l "$DEPS/debs"
    ;;
  unpack)
    if ls "$DEPS"/debs/*.deb >/dev/null 2>&1; then
      mkdir -p "$DEPS/root"
      for deb in "$DEPS"/debs/*.deb; do dpkg -x "$deb" "$DEPS/root"; done
      export CMAKE_PREFIX_PATH="$DEPS/root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
      export LD_LIBRARY_PATH="$DEPS/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "device_deps: unpacked $(ls "$DEPS"/debs/*.deb | wc -l) packages into $DEPS/root" >&2
    else
      echo "device_deps: no .deps/debs carried; using the machine's own packages" >&2
    fi
    ;;
  *)
    echo "usage: $0 download | source $0 unpack" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
