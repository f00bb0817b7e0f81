# cmake -DSOURCE=<repo> -DBINARY=<dir> -DABI=<target> -DTARGETS=<a;b;...>
#       [-DBUILD_TYPE=RelWithDebInfo] -P build-tree.cmake
#
# Configures (once; later runs reuse the tree, so make only rebuilds what
# changed) a build tree of another ABI target and builds only TARGETS: the
# fixture of the abi56.* tests (tests/abi/CMakeLists.txt). Nothing else is
# built (the tree is configured as the project's default, so every target
# the tests name exists); the jobs are two, like every build on the
# project's machines.
if(NOT SOURCE OR NOT BINARY OR NOT ABI OR NOT TARGETS)
  message(FATAL_ERROR "build-tree.cmake: SOURCE, BINARY, ABI and TARGETS are required")
endif()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE RelWithDebInfo)
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -G "Unix Makefiles"
          -DOPENVERBS_ABI=${ABI} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
          -DOPENVERBS_BUILD_BENCH=ON
  RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the ${ABI} tree failed (${rc})")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} --build ${BINARY} -j2 --target ${TARGETS}
  RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building ${TARGETS} in the ${ABI} tree failed (${rc})")
endif()
