# libFuzzer targets (tests/fuzz/README.md).
#
#   openverbs_fuzz_target(NAME SOURCES src... CORPUS dir
#                         [FLAGS flag...] [LIBS flag...] [MAX_LEN n] [LABELS label...])
#
# builds ${CMAKE_BINARY_DIR}/fuzz/bin/fuzz_NAME with Debian's clang++
# (-fsanitize=fuzzer,address,undefined; the project itself may be built with
# gcc, so the sources are compiled again by a custom command) and registers
# the ctest test fuzz.NAME (labels fuzz + LABELS): a bounded run of
# $OPENVERBS_FUZZ_SECONDS (default 20) seconds over the committed seed corpus
# CORPUS (an input that runs longer than 10 s fails it as a hang). New inputs
# go to a corpus folder in the build tree; a crash leaves
# its input as fuzz/NAME/crash-* and fails the test (turn it into a file of
# CORPUS once fixed, so it is replayed on every run). Include paths: the
# project's include/ and src/, plus libnl-3's.
find_program(OPENVERBS_CLANGXX NAMES clang++ clang++-14)

function(openverbs_fuzz_target name)
  if(NOT OPENVERBS_BUILD_FUZZ)
    return() # trees that switch fuzzing off (the sanitizer trees of tests/sanitize)
  endif()
  cmake_parse_arguments(F "" "CORPUS;MAX_LEN" "SOURCES;FLAGS;LIBS;LABELS" ${ARGN})
  if(NOT F_SOURCES OR NOT F_CORPUS)
    message(FATAL_ERROR "openverbs_fuzz_target(${name}): SOURCES and CORPUS are required")
  endif()
  if(NOT IS_DIRECTORY ${F_CORPUS})
    message(FATAL_ERROR "openverbs_fuzz_target(${name}): no seed corpus ${F_CORPUS}")
  endif()
  if(NOT OPENVERBS_CLANGXX)
    message(FATAL_ERROR "openverbs_fuzz_target(${name}): clang++ not found (tests/deps.sh installs clang)")
  endif()
  # The binary's path differs from the target's name: Ninja refuses an output
  # named like a target of the same folder.
  set(bin ${CMAKE_BINARY_DIR}/fuzz/bin/fuzz_${name})
  set(work ${CMAKE_BINARY_DIR}/fuzz/${name})
  set(srcs)
  foreach(s IN LISTS F_SOURCES)
    get_filename_component(abs ${s} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    list(APPEND srcs ${abs})
  endforeach()
  set(nl_includes)
  foreach(d IN LISTS NL3_INCLUDE_DIRS)
    list(APPEND nl_includes -I${d})
  endforeach()
  add_custom_command(OUTPUT ${bin}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/fuzz/bin
    COMMAND ${OPENVERBS_CLANGXX} -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined
            -fno-sanitize-recover=undefined -fno-omit-frame-pointer ${F_FLAGS}
            -I${OPENVERBS_PUBLIC_INCLUDE} -I${CMAKE_SOURCE_DIR}/src ${nl_includes}
            ${srcs} ${F_LIBS} -o ${bin}
    DEPENDS ${srcs} ${CMAKE_SOURCE_DIR}/cmake/OpenverbsFuzz.cmake
    IMPLICIT_DEPENDS CXX ${srcs}
    COMMENT "Building fuzz_${name} (clang libFuzzer)"
    VERBATIM)
  add_custom_target(fuzz_${name} ALL DEPENDS ${bin})
  set(max_len "")
  if(F_MAX_LEN)
    set(max_len "-max_len=${F_MAX_LEN}")
  endif()
  add_test(NAME fuzz.${name}
    COMMAND sh -c "mkdir -p '${work}/corpus' && cd '${work}' && \
ASAN_OPTIONS=detect_leaks=1 exec '${bin}' -max_total_time=\${OPENVERBS_FUZZ_SECONDS:-20} \
-seed=1 -timeout=10 -print_final_stats=1 ${max_len} -artifact_prefix='${work}/' '${work}/corpus' '${F_CORPUS}'")
  set_tests_properties(fuzz.${name} PROPERTIES LABELS "fuzz;${F_LABELS}" TIMEOUT 900)
endfunction()
