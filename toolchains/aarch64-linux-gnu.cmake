# Armv8-A (aarch64) Linux with Debian's cross compiler; NEON is baseline, the
# dot-product kernels are chosen at run time (getauxval). Tests run under qemu.
#   cmake --preset aarch64     (or -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-linux-gnu.cmake)
# For another vendor's toolchain/sysroot (e.g. a Yocto SDK), set PETREL_CROSS_PREFIX
# and PETREL_SYSROOT, or source the SDK's environment and use its own toolchain file.
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(PETREL_TRIPLET aarch64-linux-gnu)
set(PETREL_QEMU_NAME qemu-aarch64)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
