# `cmake --install build --prefix P`: the libraries, the public headers and a package config,
# so that another CMake project does
#
#   find_package(zerotrain REQUIRED)          # CMAKE_PREFIX_PATH=P
#   target_link_libraries(app PRIVATE zerotrain::zerotrain)
#
# zerotrain::zerotrain is every library behind zerotrain/zerotrain.h. The public headers are
# the ones that header reaches, found by following its #include lines when CMake configures,
# so a header that becomes public is installed without a list to keep; the others (the
# engine's internals, the stages' implementations) are not installed. The libraries are
# static and compiled against the LibTorch of this build: the package links that same
# LibTorch (its path is recorded), as the library cannot work with another.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ZEROTRAIN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/zerotrain)

add_library(zerotrain_all INTERFACE)
add_library(zerotrain::zerotrain ALIAS zerotrain_all)
set_target_properties(zerotrain_all PROPERTIES EXPORT_NAME zerotrain)
target_link_libraries(zerotrain_all INTERFACE zerotrain::trainer zerotrain::engine zerotrain::checkpoint
                      zerotrain::estimate zerotrain::models zerotrain::data)
# The public headers are C++20 (designated initializers in the options structs).
target_compile_features(zerotrain_all INTERFACE cxx_std_20)
# The nccl plugin binds to the program's zerotrain functions (comm/nccl/nccl_loader.cpp): a
# program that links the library exports its symbols, as zerotrain's own do.
target_link_options(zerotrain_all INTERFACE -rdynamic)

# Every zerotrain_* target reachable from `target` through its link libraries (PRIVATE ones
# too: a static library's private dependencies are linked by whoever links it).
function(zerotrain_reachable_targets target out)
  set(seen "")
  set(todo ${target})
  while(todo)
    list(POP_FRONT todo current)
    get_target_property(aliased ${current} ALIASED_TARGET)
    if(aliased)
      set(current ${aliased})
    endif()
    if(current IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${current})
    get_target_property(type ${current} TYPE)
    set(links "")
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(links ${current} LINK_LIBRARIES)
    endif()
    get_target_property(interface_links ${current} INTERFACE_LINK_LIBRARIES)
    foreach(dep IN LISTS links interface_links)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" dep "${dep}")
      if(TARGET ${dep} AND dep MATCHES "^zerotrain")
        list(APPEND todo ${dep})
      endif()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# The headers `header` reaches through "zerotrain/..." includes, relative to the source root.
# The generated version.h is the build tree's and is installed on its own.
function(zerotrain_public_headers header out)
  set(seen "")
  set(todo ${header})
  while(todo)
    list(POP_FRONT todo current)
    if(current IN_LIST seen OR current STREQUAL "zerotrain/version.h")
      continue()
    endif()
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/${current})
      message(FATAL_ERROR "${current}, included by a public header, does not exist")
    endif()
    list(APPEND seen ${current})
    file(STRINGS ${PROJECT_SOURCE_DIR}/${current} includes REGEX "^[ \t]*#[ \t]*include[ \t]+[\"<]zerotrain/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+[\"<](zerotrain/[^\">]+)[\">].*$" "\\1" included "${line}")
      list(APPEND todo ${included})
    endforeach()
    # CMake re-runs when a public header changes, so that a new include is followed.
    set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
                 ${PROJECT_SOURCE_DIR}/${current})
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

zerotrain_reachable_targets(zerotrain_all ZEROTRAIN_EXPORTED_TARGETS)
foreach(target IN LISTS ZEROTRAIN_EXPORTED_TARGETS)
  if(NOT target STREQUAL "zerotrain_all")
    string(REGEX REPLACE "^zerotrain_" "" name ${target})
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})   # zerotrain::engine, ...
  endif()
endforeach()

install(TARGETS ${ZEROTRAIN_EXPORTED_TARGETS} EXPORT zerotrainTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT zerotrainTargets NAMESPACE zerotrain:: DESTINATION ${ZEROTRAIN_INSTALL_CMAKEDIR})

zerotrain_public_headers(zerotrain/zerotrain.h ZEROTRAIN_PUBLIC_HEADERS)
foreach(header IN LISTS ZEROTRAIN_PUBLIC_HEADERS)
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${dir})
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/include/zerotrain/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zerotrain)
if(ZEROTRAIN_HAVE_CUDA)
  # The loader of LibTorch's CUDA half, compiled into every program (cmake/ZerotrainCuda.cmake),
  # with the headers it includes.
  install(FILES ${PROJECT_SOURCE_DIR}/zerotrain/cuda/autoload.cpp DESTINATION share/zerotrain)
  install(FILES ${PROJECT_SOURCE_DIR}/zerotrain/cuda/availability.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zerotrain/cuda)
  install(FILES ${PROJECT_BINARY_DIR}/include/zerotrain/cuda_paths.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zerotrain)
endif()

# The package config finds the dependencies the exported targets name (the others are
# recorded as paths) the way this build found them.
set(ZEROTRAIN_PACKAGE_HAS_LIBURING ${ZEROTRAIN_LIBURING_FOUND})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/zerotrainConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/zerotrainConfig.cmake
                              INSTALL_DESTINATION ${ZEROTRAIN_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zerotrainConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zerotrainConfig.cmake ${PROJECT_BINARY_DIR}/zerotrainConfigVersion.cmake
        DESTINATION ${ZEROTRAIN_INSTALL_CMAKEDIR})
