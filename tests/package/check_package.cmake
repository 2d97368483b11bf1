# The CMake package as a user meets it: install the build into a fresh prefix, then configure,
# build and run examples/p2p_local.cpp as an outside project that only does find_package(wcomm),
# and examples/xfer_cache.cpp through find_package(wcomm COMPONENTS transfer ...).
# Run by ctest (tests/CMakeLists.txt) as
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DCONSUMER_DIR=... -DEXAMPLE=... -DXFER_EXAMPLE=... -DGENERATOR=...
#         -DCXX_COMPILER=... -P check_package.cmake
# It adds no compiler launcher of its own (ccache or not is the environment's business).
foreach(var BUILD_DIR WORK_DIR CONSUMER_DIR EXAMPLE XFER_EXAMPLE GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_package.cmake: -D${var}=... is required")
  endif()
endforeach()

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer-build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# The installed libraries must exist (a build of selected targets may not have made them).
step("build the installed libraries" ${CMAKE_COMMAND} --build ${BUILD_DIR} --target wcomm_core wcomm_transport wcomm_comm
     wcomm_collectives wcomm_mesh wcomm_transfer)
step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/include/wcomm/comm.h)
  message(FATAL_ERROR "install did not put include/wcomm/comm.h in ${prefix}")
endif()
file(GLOB_RECURSE config_files ${prefix}/wcommConfig.cmake)
list(LENGTH config_files n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one wcommConfig.cmake under ${prefix}, found: ${config_files}")
endif()
get_filename_component(config_dir ${config_files} DIRECTORY)
if(NOT EXISTS ${config_dir}/wcommConfigVersion.cmake)
  message(FATAL_ERROR "install did not put wcommConfigVersion.cmake beside ${config_files}")
endif()

step("configure the outside project" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${consumer_build} -G ${GENERATOR}
     -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release
     -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DWCOMM_EXAMPLE=${EXAMPLE}
     -DWCOMM_XFER_EXAMPLE=${XFER_EXAMPLE})
# It must have found this package, not another wcomm on the machine.
file(STRINGS ${consumer_build}/CMakeCache.txt found REGEX "^wcomm_DIR:")
if(NOT found STREQUAL "wcomm_DIR:PATH=${config_dir}")
  message(FATAL_ERROR "find_package(wcomm) found ${found}, not the one in ${prefix}")
endif()
step("build p2p_local and xfer_cache against the package" ${CMAKE_COMMAND} --build ${consumer_build})
step("run p2p_local" ${consumer_build}/p2p_local TIMEOUT 60)
message(STATUS "p2p_local said:\n${step_output}")
step("run xfer_cache (wcomm::transfer, cma)" ${consumer_build}/xfer_cache cma TIMEOUT 60)
message(STATUS "xfer_cache said:\n${step_output}")
