# The one project version (project(VERSION) in the top-level CMakeLists.txt, which pyproject.toml
# reads with scikit-build-core's regex provider) and the build's optional parts, for everything
# that shows them: `tessera --version`, tessera.__version__, trace metadata, bench headers.

# tessera_build_parts(<out>): the optional parts this build has, space-separated in a fixed order
# ("ucx nccl cuda qt python"); "" when none. Call it once the whole tree is configured:
# backends/ decides whether the cuda backend is built (cuDNN found), not the option alone.
function(tessera_build_parts out)
  set(_parts "")
  foreach(_pair UCX:ucx NCCL:nccl CUDA_BACKEND:cuda QT:qt PYTHON:python)
    string(REPLACE ":" ";" _pair "${_pair}")
    list(GET _pair 0 _var)
    list(GET _pair 1 _name)
    if(TESSERA_HAVE_${_var})
      list(APPEND _parts ${_name})
    endif()
  endforeach()
  list(JOIN _parts " " _parts)
  set(${out} "${_parts}" PARENT_SCOPE)
endfunction()

# tessera_build_commit(<out>): the short git commit of the source tree when it was configured,
# "" without git or outside a clone (an sdist). Not refreshed by later commits: re-running the
# configure on every commit would relink every binary for a line of --version.
function(tessera_build_commit out)
  set(_commit "")
  find_package(Git QUIET)
  if(GIT_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
    execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short=12 HEAD
                    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}" OUTPUT_VARIABLE _commit
                    OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc ERROR_QUIET)
    if(NOT _rc EQUAL 0)
      set(_commit "")
    endif()
  endif()
  set(${out} "${_commit}" PARENT_SCOPE)
endfunction()

# Writes <build>/generated/tessera_build_info.hpp (core/src/version.cpp's figures) from
# core/src/build_info.hpp.in. core/CMakeLists.txt defers this call to the end of the top-level
# directory, where every TESSERA_HAVE_* is known. configure_file leaves an unchanged file alone,
# so a re-configure rebuilds nothing.
function(tessera_write_build_info)
  tessera_build_parts(TESSERA_BUILD_PARTS)
  tessera_build_commit(TESSERA_BUILD_COMMIT)
  configure_file("${PROJECT_SOURCE_DIR}/core/src/build_info.hpp.in"
                 "${PROJECT_BINARY_DIR}/generated/tessera_build_info.hpp" @ONLY)
endfunction()
