# Finds oneDNN (the CPU backend's tile products; Debian: libdnnl-dev) and defines the imported
# target OneDNN::dnnl. Plain header + library search rather than oneDNN's own package file:
# Debian's build of that file also requires OpenCL development files (oneDNN's GPU runtime),
# which flashbuf does not use. Set CMAKE_PREFIX_PATH (or OneDNN_ROOT) to an unpacked copy to
# use one outside the system folders.
find_path(OneDNN_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(OneDNN_LIBRARY NAMES dnnl)
if(OneDNN_INCLUDE_DIR AND EXISTS "${OneDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h")
  file(STRINGS "${OneDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _onednn_version_lines
       REGEX "#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define DNNL_VERSION_${_part} ([0-9]+).*" "\\1" OneDNN_VERSION_${_part} "${_onednn_version_lines}")
  endforeach()
  set(OneDNN_VERSION "${OneDNN_VERSION_MAJOR}.${OneDNN_VERSION_MINOR}.${OneDNN_VERSION_PATCH}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OneDNN REQUIRED_VARS OneDNN_LIBRARY OneDNN_INCLUDE_DIR VERSION_VAR OneDNN_VERSION)
if(OneDNN_FOUND AND NOT TARGET OneDNN::dnnl)
  add_library(OneDNN::dnnl UNKNOWN IMPORTED)
  set_target_properties(OneDNN::dnnl PROPERTIES IMPORTED_LOCATION "${OneDNN_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${OneDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(OneDNN_INCLUDE_DIR OneDNN_LIBRARY)
