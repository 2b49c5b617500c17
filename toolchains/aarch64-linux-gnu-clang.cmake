# Armv8-A (aarch64) Linux built with clang (Debian's clang 14) instead of the GCC cross
# compiler, against the same Debian cross sysroot:
#   cmake --preset aarch64-clang
# With --target=aarch64-linux-gnu, clang finds the GCC cross installation
# (/usr/lib/gcc-cross/aarch64-linux-gnu/12) by itself and takes from it libstdc++, the
# libc headers under /usr/aarch64-linux-gnu and the GNU cross linker
# (aarch64-linux-gnu-ld): g++-aarch64-linux-gnu must be installed, lld is not needed.
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(PETREL_TRIPLET aarch64-linux-gnu)
set(PETREL_QEMU_NAME qemu-aarch64)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)

set(CMAKE_C_COMPILER clang)
set(CMAKE_CXX_COMPILER clang++)
set(CMAKE_C_COMPILER_TARGET ${PETREL_TRIPLET})
set(CMAKE_CXX_COMPILER_TARGET ${PETREL_TRIPLET})
