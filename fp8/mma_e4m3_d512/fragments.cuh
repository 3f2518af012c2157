// fragments.cuh - the e4m3 fragment functions of the 8-bit kernels (the mma.sync m16n8k32 e4m3
// wrapper itself is in kernels/common/ptx_mma.cuh): packing four floats into four e4m3 bytes
// (round to nearest even, saturating), decoding four e4m3 bytes into f16 pairs (the one decode of
// every 8-bit kernel), the rounding residuals, and the byte permutes that turn a transposed
// ldmatrix of V into k-major B fragments. Valid on sm_89 and newer.
#pragma once

#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace wideattn::mma_e4m3 {

// Four floats -> four e4m3 bytes, byte i = element i (RNE, saturating to +-448).
__device__ __forceinline__ uint32_t pack_e4m3x4(float e0, float e1, float e2, float e3) {
    const uint32_t low = __nv_cvt_float2_to_fp8x2(make_float2(e0, e1), __NV_SATFINITE, __NV_E4M3);
    const uint32_t high = __nv_cvt_float2_to_fp8x2(make_float2(e2, e3), __NV_SATFINITE, __NV_E4M3);
    return low | (high << 16);
}

// Four e4m3 codes (one word) -> two f16 pairs, exactly (every e4m3 value is an f16): codes 0, 1
// into `low`, 2, 3 into `high` (the lower code in the lower half).
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t word, uint32_t& low, uint32_t& high) {
    const __half2_raw l = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word & 0xffffu), __NV_E4M3);
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> 16), __NV_E4M3);
    low = static_cast<uint32_t>(l.x) | (static_cast<uint32_t>(l.y) << 16);
    high = static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// The rounding residuals of four floats against their e4m3 codes `codes` (pack_e4m3x4 of the
// same floats): element i - decoded byte i, exact in fp32 where |element i| <= 448 (a code lies
// within a factor 2 of its element or is 0, so the subtraction is exact).
__device__ __forceinline__ void e4m3x4_residuals(uint32_t codes, const float (&x)[4], float (&residual)[4]) {
    uint32_t low, high;
    e4m3x4_to_f16x2x2(codes, low, high);
    const float2 l = __half22float2(*reinterpret_cast<const __half2*>(&low));
    const float2 h = __half22float2(*reinterpret_cast<const __half2*>(&high));
    residual[0] = x[0] - l.x;
    residual[1] = x[1] - l.y;
    residual[2] = x[2] - h.x;
    residual[3] = x[3] - h.y;
}

// A transposed ldmatrix (b16) of an e4m3 [key][dim] tile gives lane (g, t) the bytes
// {V[2t][2g], V[2t][2g+1], V[2t+1][2g], V[2t+1][2g+1]} of an 8-key block. Two such words
// (key blocks k and k + 8) are merged into the 4-key column of dim 2g (even) or 2g + 1 (odd).
constexpr uint32_t kSelectEvenDim = 0x6420;  // bytes 0, 2 of the first word, then of the second
constexpr uint32_t kSelectOddDim = 0x7531;   // bytes 1, 3 of the first word, then of the second

__device__ __forceinline__ uint32_t merge_even_dim(uint32_t first, uint32_t second) {
    return __byte_perm(first, second, kSelectEvenDim);
}

__device__ __forceinline__ uint32_t merge_odd_dim(uint32_t first, uint32_t second) {
    return __byte_perm(first, second, kSelectOddDim);
}

}  // namespace wideattn::mma_e4m3
