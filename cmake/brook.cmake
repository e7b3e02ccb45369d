# Helpers shared by every folder's CMakeLists.txt.

# brook_test(NAME SOURCES... LIBS...): a GoogleTest binary registered with
# ctest as one test, run from the build directory.
function(brook_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gmock GTest::gtest GTest::gtest_main)
  # A test program's own code compiles at -Og, in a little over half of
  # -O2's time (metadata/image_test.cc: 20 s against 36 s), and the test
  # programs are half the build; the libraries they test keep the build's
  # optimization. Sibling calls stay on for the coroutines' symmetric
  # transfer (as in the sanitizer build, whose flags these are).
  if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    target_compile_options(${name} PRIVATE -Og -foptimize-sibling-calls)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  get_property(resources_set DIRECTORY PROPERTY BROOK_TEST_RESOURCES)
  if(NOT resources_set)
    set_property(DIRECTORY PROPERTY BROOK_TEST_RESOURCES TRUE)
    cmake_language(DEFER CALL brook_test_resources)
  endif()
  if(ARG_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  else()
    set_tests_properties(${name} PROPERTIES TIMEOUT 300)
  endif()
endfunction()

# brook_test_resources(): what each test of the calling directory takes
# from ctest's resource allocation (ctest-resources.json in the build
# directory; scripts/test.sh passes it): one of the machine's "cpu" slots, or,
# for a test labelled "waits" (real clients against real servers, which
# spend most of their time waiting on timers and sockets), one of two
# "waits" slots, so that those run beside the CPU-bound tests instead of in
# their place. brook_test() calls it at the end of its directory; a
# directory that registers tests with add_test() alone calls it last.
function(brook_test_resources)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    get_test_property(${test} LABELS labels)
    if("waits" IN_LIST labels)
      set_tests_properties(${test} PROPERTIES RESOURCE_GROUPS "waits:1")
    else()
      set_tests_properties(${test} PROPERTIES RESOURCE_GROUPS "cpu:1")
    endif()
  endforeach()
endfunction()

# net/codec/crc32c.cc builds its shift tables at compile time: more
# constexpr steps than clang's default budget of 2^20 allows.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_compile_options(-fconstexpr-steps=16777216)
endif()

# BROOK_FUZZ (fuzz/README.md): every object gets libFuzzer's coverage
# instrumentation and ASan+UBSan; only the fuzz targets link libFuzzer itself
# (brook_fuzz_target in fuzz/CMakeLists.txt). A UBSan report aborts, so the
# fuzzer sees it as a crash.
if(BROOK_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "BROOK_FUZZ needs clang (configure with CC=clang CXX=clang++)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined
                      -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  # Clang 14 cannot assemble coroutines (io/scope.cc) instrumented with both
  # sanitizer coverage and UBSan's function-type check ("Cannot represent a
  # difference across sections"); that one check is left out.
  add_compile_options(-fno-sanitize=function)
  add_link_options(-fsanitize=address,undefined)
endif()

# brook_precompiled_headers(): GCC only. Every C++ target of the build reads
# the standard library, fmt and Abseil's Status headers before its own code,
# about 2 s of each translation unit's compile time (3.5 s with GoogleTest,
# GoogleMock and RapidCheck), and the build has over two hundred. Two
# precompiled headers carry them: one made with the libraries' and programs'
# flags, one with the test programs' (-Og, brook_test); each target reuses
# the one made with its own flags. (CMake adds -Winvalid-pch, so under
# -Werror a header made with other flags, or other macros such as fmt's
# FMT_SHARED, fails the build rather than going unused.) Saves about 1.5 s
# of a translation unit's 2-25 s, 7 % of the release build. Called last,
# once every target exists.
set(brook_pch_headers <algorithm> <array> <chrono> <coroutine> <cstdint> <cstring> <functional> <map>
    <memory> <optional> <set> <span> <string> <string_view> <utility> <vector>
    <fmt/format.h> [["absl/status/status.h"]] [["absl/status/statusor.h"]])
function(brook_precompiled_headers)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  file(WRITE "${CMAKE_BINARY_DIR}/brook_pch.cc" "// Compiles the precompiled header alone.\n")
  add_library(brook_pch OBJECT "${CMAKE_BINARY_DIR}/brook_pch.cc")
  target_link_libraries(brook_pch PRIVATE fmt::fmt absl::status absl::statusor)
  target_precompile_headers(brook_pch PRIVATE ${brook_pch_headers})
  add_library(brook_pch_test OBJECT "${CMAKE_BINARY_DIR}/brook_pch.cc")
  target_link_libraries(brook_pch_test PRIVATE fmt::fmt absl::status absl::statusor GTest::gmock GTest::gtest
                        rapidcheck)
  target_precompile_headers(brook_pch_test PRIVATE ${brook_pch_headers} <gtest/gtest.h> <gmock/gmock.h>
                            <rapidcheck.h> <rapidcheck/gtest.h>)
  if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    target_compile_options(brook_pch_test PRIVATE -Og -foptimize-sibling-calls)
  endif()
  set(dirs "${PROJECT_SOURCE_DIR}")
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(target MATCHES "^brook_pch" OR NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
        continue()
      endif()
      get_target_property(options ${target} COMPILE_OPTIONS)
      get_target_property(libs ${target} LINK_LIBRARIES)
      list(FILTER libs INCLUDE REGEX "^(brook_|fmt::|GTest::|PkgConfig::RE2)")
      if(NOT libs MATCHES "brook_|fmt::")
        continue()  # a program without fmt: neither header was made for it
      elseif("PkgConfig::RE2" IN_LIST libs)
        # RE2's flags add -pthread, which defines _REENTRANT: a header of its own.
        target_precompile_headers(${target} PRIVATE ${brook_pch_headers})
      elseif("GTest::gtest" IN_LIST libs AND (NOT CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo" OR "-Og" IN_LIST options))
        target_precompile_headers(${target} REUSE_FROM brook_pch_test)
      elseif(NOT "-Og" IN_LIST options)
        target_precompile_headers(${target} REUSE_FROM brook_pch)
      endif()
    endforeach()
  endwhile()
endfunction()
