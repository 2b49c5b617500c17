// The AVX-VNNI path (engine/src/kernels/x86/avx_vnni.cpp) built again with vpdpbusd
// computed by an exact AVX2 sequence, as avx_vnni_emulated_table(): the kernel tests
// compare it with the scalar reference on every AVX2 CPU, where the real path runs
// only on CPUs with AVX-VNNI.
#define PETREL_AVX_VNNI_EMULATED
#include "kernels/x86/avx_vnni.cpp"
