# Near-memory page selection (issue 10: PNM-KV / PnG-KV). Appends the engine
# to SPECKV_CORE_SOURCES and defines the evaluation tool (nmp_eval) over the
# real tiny models.
set(_nmp_dir ${CMAKE_CURRENT_SOURCE_DIR}/lib)
list(APPEND SPECKV_CORE_SOURCES ${_nmp_dir}/nmp.cc ${_nmp_dir}/nmp_avx2.cc ${_nmp_dir}/nmp_avx512.cc)

# The scoring kernels must agree bit for bit (docs/selection.md §2.3): no FMA
# contraction the code did not write, whatever flags a build adds. The SIMD
# files are compiled for the baseline with a target region inside
# (lib/isa_target.h) and reached only after a runtime CPU check (lib/cpu.h).
# Same two-scope mechanism as cmake/codec.cmake: source properties are per
# directory and lib/ is added after this file.
set(_nmp_avx2_flags "-ffp-contract=off")
set(_nmp_avx512_flags "-ffp-contract=off;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized;-Wno-uninitialized>")
function(speckv_nmp_simd_flags)
  set(_dirs ${ARGN})
  set_source_files_properties(${_nmp_dir}/nmp_avx2.cc DIRECTORY ${_dirs}
    PROPERTIES COMPILE_OPTIONS "${_nmp_avx2_flags}")
  set_source_files_properties(${_nmp_dir}/nmp_avx512.cc DIRECTORY ${_dirs}
    PROPERTIES COMPILE_OPTIONS "${_nmp_avx512_flags}")
  set_source_files_properties(${_nmp_dir}/nmp.cc DIRECTORY ${_dirs}
    PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
endfunction()
speckv_nmp_simd_flags(${CMAKE_CURRENT_SOURCE_DIR})
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/lib/CMakeLists.txt)
  cmake_language(DEFER DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
    CALL speckv_nmp_simd_flags ${CMAKE_CURRENT_SOURCE_DIR}/lib)
endif()

# Evaluation on the real models: a forward pass whose attention goes through
# the selector (tools/nmp_eval), as a static library (used by tests/nmp) and a
# CLI-free executable that prints the tables of docs/selection.md.
add_library(speckv_nmp_eval STATIC ${CMAKE_CURRENT_SOURCE_DIR}/tools/nmp_eval/nmp_forward.cc)
target_include_directories(speckv_nmp_eval PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/tools/nmp_eval)
target_link_libraries(speckv_nmp_eval PUBLIC speckv_llama2 speckv_static)
add_executable(nmp_eval ${CMAKE_CURRENT_SOURCE_DIR}/tools/nmp_eval/nmp_eval_main.cc)
target_link_libraries(nmp_eval PRIVATE speckv_nmp_eval)
target_compile_definitions(nmp_eval PRIVATE
  SPECKV_DATA_DIR_DEFAULT="${SPECKV_DATA_DIR}")
