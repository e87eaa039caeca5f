// flashbuf's version: the one place it is written. CMake (CMakeLists.txt), the Python
// package's metadata (pyproject.toml, through scikit-build-core's regex provider) and
// flashbuf.__version__ (through the extension) all read these three lines.
#pragma once

#define FLASHBUF_VERSION_MAJOR 0
#define FLASHBUF_VERSION_MINOR 1
#define FLASHBUF_VERSION_PATCH 0

#define FLASHBUF_VERSION_STRINGIFY_(x) #x
#define FLASHBUF_VERSION_STRINGIFY(x) FLASHBUF_VERSION_STRINGIFY_(x)
// "MAJOR.MINOR.PATCH", e.g. "0.1.0".
#define FLASHBUF_VERSION_STRING                                                  \
  FLASHBUF_VERSION_STRINGIFY(FLASHBUF_VERSION_MAJOR) "." FLASHBUF_VERSION_STRINGIFY( \
      FLASHBUF_VERSION_MINOR) "." FLASHBUF_VERSION_STRINGIFY(FLASHBUF_VERSION_PATCH)
// One integer that orders versions: MAJOR * 10000 + MINOR * 100 + PATCH.
#define FLASHBUF_VERSION \
  (FLASHBUF_VERSION_MAJOR * 10000 + FLASHBUF_VERSION_MINOR * 100 + FLASHBUF_VERSION_PATCH)
