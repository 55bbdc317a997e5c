# FindCUDNN: cuDNN ships no CMake config; look for cudnn.h and libcudnn in the CUDA toolkit (or
# CUDNN_HOME). The versioned file name is accepted too: NVIDIA's wheels (nvidia-cudnn-cu13) ship
# libcudnn.so.9 and no unversioned link.
# Defines CUDNN_FOUND, CUDNN_VERSION, CUDNN_LIBRARY_DIR and the imported target CUDNN::cudnn.
# CUDNN_HOME, when set, is searched first; every folder is searched for both names before the next.
find_path(CUDNN_INCLUDE_DIR cudnn.h
  HINTS ENV CUDNN_HOME ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 NAMES_PER_DIR
  HINTS ENV CUDNN_HOME ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/local/cuda/lib
  PATH_SUFFIXES lib64 lib)
if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_major REGEX "^#define CUDNN_MAJOR [0-9]+")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_minor REGEX "^#define CUDNN_MINOR [0-9]+")
  string(REGEX MATCH "[0-9]+" _cudnn_major "${_cudnn_major}")
  string(REGEX MATCH "[0-9]+" _cudnn_minor "${_cudnn_minor}")
  set(CUDNN_VERSION "${_cudnn_major}.${_cudnn_minor}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR VERSION_VAR CUDNN_VERSION)
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  get_filename_component(CUDNN_LIBRARY_DIR "${CUDNN_LIBRARY}" DIRECTORY)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
