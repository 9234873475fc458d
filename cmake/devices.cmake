# Real CXL memory (issue 8: devdax and NUMA backends, device discovery).
# The backends themselves (lib/backend_dax.cc, lib/backend_numa.cc) are in the
# core's source list already; libdaxctl and libnuma are linked by lib/.
list(APPEND SPECKV_CORE_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/lib/devices.cc)
list(APPEND SPECKV_CLI_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cli/cmd_devices.cc)
