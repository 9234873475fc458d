# The codec (issue 3: KV codec). Appends to SPECKV_CORE_SOURCES / SPECKV_CLI_SOURCES /
# SPECKV_CLI_LIBS, and defines the llama2 forward-pass library used by tests and the CLI.
set(_codec_dir ${CMAKE_CURRENT_SOURCE_DIR}/lib)
list(APPEND SPECKV_CORE_SOURCES
  ${_codec_dir}/codec_ref.cc
  ${_codec_dir}/codec_adaptive.cc)

# SIMD translation units, compiled for their ISA and reached only after a
# runtime CPU check (codec_ref.cc kernels_for()). Source properties are
# per directory and the core library is defined in lib/, which is added after
# this file is included: so the flags are set here (for a target in this
# directory) and again, deferred, in lib/'s scope once it exists. Without the
# flags the files compile to "not available" stubs, never to wrong code.
list(APPEND SPECKV_CORE_SOURCES ${_codec_dir}/codec_avx2.cc ${_codec_dir}/codec_avx512.cc)
set(_codec_avx2_flags "")
set(_codec_avx512_flags "")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  set(_codec_avx2_flags "-mavx2;-mf16c")
  # GCC 12's avx512fintrin.h trips its own -Wmaybe-uninitialized (GCC PR 105593).
  set(_codec_avx512_flags "-mavx512f;-mavx512bw;-mavx512vl;-mf16c;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized;-Wno-uninitialized>")
endif()
function(speckv_codec_simd_flags)
  set(_dirs ${ARGN})
  set_source_files_properties(${_codec_dir}/codec_avx2.cc DIRECTORY ${_dirs}
    PROPERTIES COMPILE_OPTIONS "${_codec_avx2_flags}")
  set_source_files_properties(${_codec_dir}/codec_avx512.cc DIRECTORY ${_dirs}
    PROPERTIES COMPILE_OPTIONS "${_codec_avx512_flags}")
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
