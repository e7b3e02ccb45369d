# Helpers shared by every folder's CMakeLists.txt.

# brook_test(NAME SOURCES... LIBS...): a GoogleTest binary registered with
# ctest as one test, run from the build directory.
function(brook_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gmock GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  if(ARG_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  else()
    set_tests_properties(${name} PROPERTIES TIMEOUT 300)
  endif()
endfunction()

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
  # net/codec/crc32c.cc builds its shift tables at compile time: more
  # constexpr steps than clang's default budget of 2^20 allows.
  add_compile_options(-fconstexpr-steps=16777216)
  # Clang 14 cannot assemble coroutines (io/scope.cc) instrumented with both
  # sanitizer coverage and UBSan's function-type check ("Cannot represent a
  # difference across sections"); that one check is left out.
  add_compile_options(-fno-sanitize=function)
  add_link_options(-fsanitize=address,undefined)
endif()
