# Armv8-A (aarch64) Linux with Debian's cross compiler; NEON is baseline, the
# dot-product kernels are chosen at run time (getauxval). Tests run under qemu.
#   cmake --preset aarch64     (or -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-linux-gnu.cmake)
# For another vendor's toolchain/sysroot (e.g. a Yocto SDK), set PETREL_CROSS_PREFIX
# and PETREL_SYSROOT, or source the SDK's environment and use its own toolchain file.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(PETREL_CROSS_PREFIX "aarch64-linux-gnu-" CACHE STRING "cross compiler prefix")
set(CMAKE_C_COMPILER ${PETREL_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${PETREL_CROSS_PREFIX}g++)
set(PETREL_SYSROOT "/usr/aarch64-linux-gnu" CACHE PATH "target sysroot (libraries for qemu -L)")
if(NOT PETREL_SYSROOT STREQUAL "/usr/aarch64-linux-gnu")
  set(CMAKE_SYSROOT ${PETREL_SYSROOT})
endif()

# The CPU model comes from the environment: QEMU_CPU=max, QEMU_CPU=cortex-a53, ...
find_program(PETREL_QEMU qemu-aarch64)
if(PETREL_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PETREL_QEMU} -L ${PETREL_SYSROOT})
endif()

# Header-only dependencies (xsimd, FlatBuffers, Catch2, nlohmann-json) are found
# through the build machine's CMake packages: Debian installs them under its own
# multiarch directory, and their headers under /usr/include, which Debian's cross
# compilers search after their own libc headers (never add -I/usr/include).
if(CMAKE_HOST_SYSTEM_PROCESSOR)
  list(APPEND CMAKE_PREFIX_PATH "/usr/lib/${CMAKE_HOST_SYSTEM_PROCESSOR}-linux-gnu/cmake")
else()
  list(APPEND CMAKE_PREFIX_PATH "/usr/lib/x86_64-linux-gnu/cmake")
endif()

set(CMAKE_FIND_ROOT_PATH ${PETREL_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
