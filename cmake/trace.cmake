# Trace replay and the hardware model (issue 6): trace readers/generators and the
# virtual-time serving-engine model (tools/trace), the `speckv trace` commands.
add_library(speckv_trace STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/tools/trace/trace_reader.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/tools/trace/presets.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/tools/trace/engine.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/tools/trace/report.cc)
target_include_directories(speckv_trace PUBLIC
  ${CMAKE_CURRENT_SOURCE_DIR}/tools/trace
  ${CMAKE_CURRENT_SOURCE_DIR}/include)
# Only the public C API of the library is used.
target_link_libraries(speckv_trace PUBLIC speckv_static)

list(APPEND SPECKV_CLI_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cli/cmd_trace.cc)
list(APPEND SPECKV_CLI_LIBS speckv_trace)
