# Armv7-A hard-float Linux with NEON (Raspberry Pi 2/3 32-bit userlands, i.MX 6/7)
# with Debian's cross compiler. Tests run under qemu-arm.
#   cmake --preset armv7       (or -DCMAKE_TOOLCHAIN_FILE=toolchains/arm-linux-gnueabihf.cmake)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR armv7)

set(PETREL_CROSS_PREFIX "arm-linux-gnueabihf-" CACHE STRING "cross compiler prefix")
set(CMAKE_C_COMPILER ${PETREL_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${PETREL_CROSS_PREFIX}g++)
# neon-vfpv4 makes xsimd::fma a fused multiply-add, as on x86 and aarch64.
set(CMAKE_C_FLAGS_INIT "-march=armv7-a -mfpu=neon-vfpv4 -mfloat-abi=hard")
set(CMAKE_CXX_FLAGS_INIT "-march=armv7-a -mfpu=neon-vfpv4 -mfloat-abi=hard")
set(PETREL_SYSROOT "/usr/arm-linux-gnueabihf" CACHE PATH "target sysroot (libraries for qemu -L)")
if(NOT PETREL_SYSROOT STREQUAL "/usr/arm-linux-gnueabihf")
  set(CMAKE_SYSROOT ${PETREL_SYSROOT})
endif()

# The CPU model comes from the environment: QEMU_CPU=max, QEMU_CPU=cortex-a53, ...
find_program(PETREL_QEMU qemu-arm)
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
