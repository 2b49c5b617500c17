# WebAssembly (wasm32, SIMD128) with Debian's emscripten 3.1.6: single-threaded, or with
# emscripten's pthreads when PETREL_WASM_PTHREADS is ON (the JavaScript package's threaded
# module is such a tree, configured by bindings/js under the wasm one).
#   cmake --preset wasm && cmake --build build/wasm
# Wraps emscripten's own toolchain file; tests run under Node 20 (ctest's emulator),
# as the ARM builds run under qemu. Every build of this toolchain needs SIMD128: each
# browser Petrel targets has had it since 2021-2023 (Chrome 91, Firefox 89, Safari 16.4),
# and a module cannot choose its instructions at run time.
set(PETREL_EMSCRIPTEN_ROOT "/usr/share/emscripten" CACHE PATH "emscripten's directory")
include(${PETREL_EMSCRIPTEN_ROOT}/cmake/Modules/Platform/Emscripten.cmake)

# emcc runs its JavaScript optimizer with `node`; Debian's node-acorn lives in
# /usr/share/nodejs, where a Node that is not Debian's does not look (PLATFORM-NOTES).
set(CMAKE_C_LINKER_LAUNCHER ${CMAKE_COMMAND} -E env NODE_PATH=/usr/share/nodejs)
set(CMAKE_CXX_LINKER_LAUNCHER ${CMAKE_COMMAND} -E env NODE_PATH=/usr/share/nodejs)

# -msimd128: the SIMD128 kernels (engine/src/kernels/wasm) and vectorized scalar code.
# -fwasm-exceptions: WebAssembly's own exceptions (Node 20, Chromium 95+, Firefox 100+):
# the engine turns std::bad_alloc into an error; emscripten's default aborts on any throw.
set(CMAKE_C_FLAGS_INIT "-msimd128 -fwasm-exceptions")
set(CMAKE_CXX_FLAGS_INIT "-msimd128 -fwasm-exceptions")
# Memory grows on demand up to wasm32's 4 GiB.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-fwasm-exceptions -sALLOW_MEMORY_GROWTH=1 -sMAXIMUM_MEMORY=4GB")
# pthreads: every object is compiled with atomics and bulk memory (wasm-ld refuses shared
# memory otherwise), so a threaded module needs its own build of the engine.
option(PETREL_WASM_PTHREADS "emscripten pthreads (SharedArrayBuffer, Web Workers)" OFF)
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES PETREL_WASM_PTHREADS)
if(PETREL_WASM_PTHREADS)
  string(APPEND CMAKE_C_FLAGS_INIT " -pthread")
  string(APPEND CMAKE_CXX_FLAGS_INIT " -pthread")
  string(APPEND CMAKE_EXE_LINKER_FLAGS_INIT " -pthread")
endif()

find_program(PETREL_NODE node REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${PETREL_NODE})

# Header-only dependencies (xsimd is not used by this target, FlatBuffers, Catch2) come
# from the build machine.
list(APPEND CMAKE_PREFIX_PATH "/usr/lib/x86_64-linux-gnu/cmake" "/usr/share/cmake" "/usr/lib/cmake")
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
