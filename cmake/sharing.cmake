# Prefix sharing (issue 7): the block-hash helper. The rest of sharing lives in
# lib/pool.cc.
list(APPEND SPECKV_CORE_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/lib/block_hash.cc)
list(APPEND SPECKV_CORE_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/lib/flush.cc)
