#!/usr/bin/env bash
# oneDNN (the CPU backend's tile products) for machines that cannot install packages, such as
# the GPU machine: download the Debian packages here, carry .deps/ (run's `carry`), unpack there.
#
#   here:   scripts/gpu/onednn_deps.sh download          # .deps/debs/*.deb, about 7 MB
#   there:  source scripts/gpu/onednn_deps.sh unpack     # .deps/root; exports the search paths
#
# After `unpack`, CMake finds oneDNN through CMAKE_PREFIX_PATH (cmake/FindOneDNN.cmake) and the
# loader finds libdnnl.so.2 and its libOpenCL.so.1 through LD_LIBRARY_PATH. Where
# /usr/include/oneapi/dnnl/dnnl.hpp exists already, `unpack` does nothing.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPS="$ROOT/.deps"
case "${1:-}" in
  download)
    mkdir -p "$DEPS/debs"
    (cd "$DEPS/debs" && apt-get download libdnnl2 libdnnl-dev ocl-icd-libopencl1)
    ls -l "$DEPS/debs"
    ;;
  unpack)
    if [ -f /usr/include/oneapi/dnnl/dnnl.hpp ]; then
      echo "oneDNN: system copy in /usr" >&2
    else
      mkdir -p "$DEPS/root"
      for deb in "$DEPS"/debs/*.deb; do dpkg -x "$deb" "$DEPS/root"; done
      export CMAKE_PREFIX_PATH="$DEPS/root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
      export LD_LIBRARY_PATH="$DEPS/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "oneDNN: unpacked into $DEPS/root" >&2
    fi
    ;;
  *)
    echo "usage: $0 download | source $0 unpack" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
