# Finding the build's dependencies: a missing one fails configure with one
# message naming the Debian 12 packages to install (deploy/install-deps.sh
# installs them all), instead of silently leaving targets out.

# zshard_find_package(<Package> "<debian packages>" [find_package args...])
macro(zshard_find_package package debian)
  find_package(${package} ${ARGN} QUIET)
  if(NOT ${package}_FOUND)
    message(FATAL_ERROR "zshard: ${package} was not found: install ${debian}")
  endif()
endmacro()

# zshard_pkg_check(<PREFIX> <pkg-config module> "<debian packages>"): the
# imported target PkgConfig::<PREFIX>.
macro(zshard_pkg_check prefix module debian)
  if(NOT TARGET PkgConfig::${prefix})
    pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
    if(NOT ${prefix}_FOUND)
      message(FATAL_ERROR
        "zshard: pkg-config module ${module} was not found: install ${debian}")
    endif()
  endif()
endmacro()
