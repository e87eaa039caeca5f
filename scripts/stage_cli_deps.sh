#!/usr/bin/env bash
# Copies the command line's header-only dependencies (CLI11, nlohmann/json), as this machine's
# Debian packages installed them, into build-deps/ (git-ignored), laid out as an install
# prefix: build-deps/include/{CLI,nlohmann} and their CMake package files under
# build-deps/share/cmake/. A machine without network then builds the CLI from that copy:
#   cmake ... -DCMAKE_PREFIX_PATH="$PWD/build-deps"
# (scripts/gpu/*.sh and scripts/gpu_cycle.sh pass it when build-deps/ exists).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST="$ROOT/build-deps"
for f in /usr/include/CLI/CLI.hpp /usr/include/nlohmann/json.hpp \
         /usr/share/cmake/CLI11/CLI11Config.cmake /usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake; do
  [ -f "$f" ] || { echo "stage_cli_deps: $f is missing: apt-get install libcli11-dev nlohmann-json3-dev" >&2; exit 1; }
done
rm -rf "$DEST"
mkdir -p "$DEST/include" "$DEST/share/cmake"
cp -r /usr/include/CLI /usr/include/nlohmann "$DEST/include/"
cp -r /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json "$DEST/share/cmake/"
echo "staged CLI11 and nlohmann/json in $DEST ($(du -sh "$DEST" | cut -f1))"
