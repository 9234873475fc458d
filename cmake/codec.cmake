# The codec (issue 3) appends its sources here.
list(APPEND SPECKV_CLI_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cli/cmd_codec.cc)
