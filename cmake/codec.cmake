# The codec (issue 3: KV codec). Appends to SPECKV_CORE_SOURCES / SPECKV_CLI_SOURCES /
# SPECKV_CLI_LIBS, and defines the llama2 forward-pass library used by tests and the CLI.
set(_codec_dir ${CMAKE_CURRENT_SOURCE_DIR}/lib)
list(APPEND SPECKV_CORE_SOURCES
  ${_codec_dir}/codec_ref.cc
  ${_codec_dir}/codec_packed.cc
  ${_codec_dir}/codec_adaptive.cc)

# SIMD translation units: compiled for the baseline, with a target region
# inside (lib/isa_target.h), reached only after a runtime CPU check
# (lib/cpu.h; codec_ref.cc kernels_for()).
list(APPEND SPECKV_CORE_SOURCES ${_codec_dir}/codec_avx2.cc ${_codec_dir}/codec_avx512.cc
  ${_codec_dir}/codec_packed_avx2.cc ${_codec_dir}/codec_packed_avx512.cc)
# GCC 12's avx512fintrin.h trips its own -Wmaybe-uninitialized (GCC PR 105593). Source
# properties are per directory and the core library is defined in lib/, added after this file:
# so the property is set, deferred, in lib/'s scope.
function(speckv_codec_simd_flags)
  set_source_files_properties(${_codec_dir}/codec_avx512.cc ${_codec_dir}/codec_packed_avx512.cc DIRECTORY ${ARGN}
    PROPERTIES COMPILE_OPTIONS "$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized;-Wno-uninitialized>")
endfunction()
speckv_codec_simd_flags(${CMAKE_CURRENT_SOURCE_DIR})
if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/lib/CMakeLists.txt)
  cmake_language(DEFER DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
    CALL speckv_codec_simd_flags ${CMAKE_CURRENT_SOURCE_DIR}/lib)
endif()

# llama2.c forward pass (tools/llama2): model loader, tokenizer, KV capture,
# run with the KV cache through the codec. Static; used by the CLI and tests.
add_library(speckv_llama2 STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/tools/llama2/llama2.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/tools/llama2/kv_eval.cc)
target_include_directories(speckv_llama2 PUBLIC
  ${CMAKE_CURRENT_SOURCE_DIR}/tools/llama2
  ${_codec_dir}
  ${CMAKE_CURRENT_SOURCE_DIR}/include)
target_link_libraries(speckv_llama2 PUBLIC speckv_static)

list(APPEND SPECKV_CLI_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cli/cmd_codec.cc)
list(APPEND SPECKV_CLI_LIBS speckv_llama2 PkgConfig::ZSTD)
