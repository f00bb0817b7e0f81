# Build options shared by every target of the project.

# OFF; ON or address: AddressSanitizer + UndefinedBehaviorSanitizer; thread:
# ThreadSanitizer (tests/sanitize builds one tree of each).
set(OPENVERBS_SANITIZE OFF CACHE STRING "Sanitizers: OFF, ON/address (ASan+UBSan), thread (TSan)")
option(OPENVERBS_BUILD_FUZZ "Build the libFuzzer targets (tests/fuzz, needs clang)" ON)
option(OPENVERBS_BUILD_BENCH "Build the benchmarks in bench/" ON)
option(OPENVERBS_WERROR "Treat warnings as errors" OFF)

set(OPENVERBS_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
if(OPENVERBS_WERROR)
  list(APPEND OPENVERBS_WARNINGS -Werror)
endif()
add_compile_options(${OPENVERBS_WARNINGS})
# Lets the linker drop unused code of the shared objects (--gc-sections).
add_compile_options(-ffunction-sections -fdata-sections)

if(OPENVERBS_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(OPENVERBS_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# Shared objects of the project: hidden by default, bound at load time
# (BIND_NOW), no undefined symbols.
function(openverbs_shared_library_flags target)
  set_target_properties(${target} PROPERTIES
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${target} PRIVATE -Wl,-z,now -Wl,-z,relro)
  if(NOT OPENVERBS_SANITIZE)
    # A C library: C programs loading it should not drag in libstdc++,
    # libgcc_s and libm (resident memory, load time). The C++ runtime is
    # linked in privately and none of its symbols is exported.
    target_link_options(${target} PRIVATE -Wl,--no-undefined
      -static-libstdc++ -static-libgcc -Wl,--exclude-libs,ALL -Wl,--gc-sections)
  endif()
endfunction()

# Generates a linker version script from a symbol table in the format of
# Debian's symbol lists ("A NODE", "T name@@NODE", "T name@NODE", "B name@@NODE"),
# for the configured ABI target (lines may carry a target condition, see
# cmake/OpenverbsAbiCondition.cmake). Non-default entries (single '@') are
# bound in the sources with .symver.
function(openverbs_version_script table out)
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DTABLE=${table} -DOUT=${out} -DABI=${OPENVERBS_ABI}
            -P ${CMAKE_SOURCE_DIR}/cmake/GenVersionScript.cmake
    DEPENDS ${table} ${CMAKE_SOURCE_DIR}/cmake/GenVersionScript.cmake
            ${CMAKE_SOURCE_DIR}/cmake/OpenverbsAbiCondition.cmake
    COMMENT "Generating ${out}")
endfunction()
