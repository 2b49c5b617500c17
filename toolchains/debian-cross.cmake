# Shared by the toolchain files: a Debian cross compiler named by
# PETREL_CROSS_PREFIX, a target sysroot (PETREL_SYSROOT, Debian's by default), qemu-user
# as the emulator ctest runs tests with, and where the header-only dependencies are.
# The including file sets CMAKE_SYSTEM_PROCESSOR, PETREL_TRIPLET and PETREL_QEMU_NAME.
set(CMAKE_SYSTEM_NAME Linux)

set(PETREL_CROSS_PREFIX "${PETREL_TRIPLET}-" CACHE STRING "cross compiler prefix")
set(CMAKE_C_COMPILER ${PETREL_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${PETREL_CROSS_PREFIX}g++)
set(PETREL_SYSROOT "/usr/${PETREL_TRIPLET}" CACHE PATH "target sysroot (libraries for qemu -L)")
if(NOT PETREL_SYSROOT STREQUAL "/usr/${PETREL_TRIPLET}")
  set(CMAKE_SYSROOT ${PETREL_SYSROOT})
endif()

# The CPU model comes from the environment: QEMU_CPU=max, QEMU_CPU=cortex-a53, ...
find_program(PETREL_QEMU ${PETREL_QEMU_NAME})
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
