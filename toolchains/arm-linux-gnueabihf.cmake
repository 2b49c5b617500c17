# Armv7-A hard-float Linux with NEON (Raspberry Pi 2/3 32-bit userlands, i.MX 6/7)
# with Debian's cross compiler. Tests run under qemu-arm.
#   cmake --preset armv7       (or -DCMAKE_TOOLCHAIN_FILE=toolchains/arm-linux-gnueabihf.cmake)
set(CMAKE_SYSTEM_PROCESSOR armv7)
set(PETREL_TRIPLET arm-linux-gnueabihf)
set(PETREL_QEMU_NAME qemu-arm)
# neon-vfpv4 makes xsimd::fma a fused multiply-add, as on x86 and aarch64.
set(CMAKE_C_FLAGS_INIT "-march=armv7-a -mfpu=neon-vfpv4 -mfloat-abi=hard")
set(CMAKE_CXX_FLAGS_INIT "-march=armv7-a -mfpu=neon-vfpv4 -mfloat-abi=hard")
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
