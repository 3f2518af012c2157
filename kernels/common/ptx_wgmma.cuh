// ptx_wgmma.cuh - device wrappers over the sm_90a wgmma PTX of the Hopper tier (descriptors and
// layout: wgmma_layout.h): the wgmma shapes the kernels issue
// (scores: m64n32k16 bf16 / m64n32k32 e4m3 with both operands in shared memory, m64n64k32 e4m3
// for wgmma_e4m3alt64_d512's 64-key tiles; P V:
// m64n256k16 bf16 / fp16 with A in registers and B MN-major in shared memory, m64n256k32 e4m3
// with A in registers and B K-major in shared memory), wgmma
// fence/commit/wait, the generic-to-async proxy fence, and operand pins that keep the compiler
// from moving accumulator reads above a wait.
#pragma once

#include <cstdint>

#include "kernels/common/wgmma_layout.h"

namespace wideattn::ptx {

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Makes this thread's completed generic-proxy shared-memory writes (cp.async, st.shared)
// visible to later async-proxy reads (wgmma operands).
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Ties an accumulator register to this point of the program: reads after it cannot move above
// a preceding wgmma wait.
__device__ __forceinline__ void pin(float& value) { asm volatile("" : "+f"(value)::"memory"); }

// Keeps an A-fragment register alive (unchanged) up to this point, so the compiler cannot reuse it
// while a wgmma that reads it may still be in flight.
__device__ __forceinline__ void pin(uint32_t& value) { asm volatile("" : "+r"(value)::"memory"); }

// pin() on every element of a fragment array (an accumulator or a set of A fragments).
template <typename T, int32_t kRows, int32_t kCols>
__device__ __forceinline__ void pin_all(T (&values)[kRows][kCols]) {
#pragma unroll
    for (int32_t r = 0; r < kRows; ++r)
#pragma unroll
        for (int32_t c = 0; c < kCols; ++c) pin(values[r][c]);
}

// Operand lists of the two accumulator shapes: 16 fp32 per thread (64 x 32, s[4][4]) and 128
// (64 x 256, o[32][4]); a thread holds acc[8-column quad][4] in the m16n8 accumulator layout.
#define WIDEATTN_ACC16_REGS \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define WIDEATTN_ACC16_OPERANDS(acc) \
    "+f"(acc[0][0]), "+f"(acc[0][1]), "+f"(acc[0][2]), "+f"(acc[0][3]), \
    "+f"(acc[1][0]), "+f"(acc[1][1]), "+f"(acc[1][2]), "+f"(acc[1][3]), \
    "+f"(acc[2][0]), "+f"(acc[2][1]), "+f"(acc[2][2]), "+f"(acc[2][3]), \
    "+f"(acc[3][0]), "+f"(acc[3][1]), "+f"(acc[3][2]), "+f"(acc[3][3])
#define WIDEATTN_ACC32_REGS \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WIDEATTN_ACC32_OPERANDS(acc) \
    "+f"(acc[0][0]), "+f"(acc[0][1]), "+f"(acc[0][2]), "+f"(acc[0][3]), \
    "+f"(acc[1][0]), "+f"(acc[1][1]), "+f"(acc[1][2]), "+f"(acc[1][3]), \
    "+f"(acc[2][0]), "+f"(acc[2][1]), "+f"(acc[2][2]), "+f"(acc[2][3]), \
    "+f"(acc[3][0]), "+f"(acc[3][1]), "+f"(acc[3][2]), "+f"(acc[3][3]), \
    "+f"(acc[4][0]), "+f"(acc[4][1]), "+f"(acc[4][2]), "+f"(acc[4][3]), \
    "+f"(acc[5][0]), "+f"(acc[5][1]), "+f"(acc[5][2]), "+f"(acc[5][3]), \
    "+f"(acc[6][0]), "+f"(acc[6][1]), "+f"(acc[6][2]), "+f"(acc[6][3]), \
    "+f"(acc[7][0]), "+f"(acc[7][1]), "+f"(acc[7][2]), "+f"(acc[7][3])
#define WIDEATTN_ACC128_REGS \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
    "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, " \
    "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, " \
    "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, " \
    "%109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, " \
    "%124, %125, %126, %127"
#define WIDEATTN_ACC128_OPERANDS(acc) \
    "+f"(acc[0][0]), "+f"(acc[0][1]), "+f"(acc[0][2]), "+f"(acc[0][3]), \
    "+f"(acc[1][0]), "+f"(acc[1][1]), "+f"(acc[1][2]), "+f"(acc[1][3]), \
    "+f"(acc[2][0]), "+f"(acc[2][1]), "+f"(acc[2][2]), "+f"(acc[2][3]), \
    "+f"(acc[3][0]), "+f"(acc[3][1]), "+f"(acc[3][2]), "+f"(acc[3][3]), \
    "+f"(acc[4][0]), "+f"(acc[4][1]), "+f"(acc[4][2]), "+f"(acc[4][3]), \
    "+f"(acc[5][0]), "+f"(acc[5][1]), "+f"(acc[5][2]), "+f"(acc[5][3]), \
    "+f"(acc[6][0]), "+f"(acc[6][1]), "+f"(acc[6][2]), "+f"(acc[6][3]), \
    "+f"(acc[7][0]), "+f"(acc[7][1]), "+f"(acc[7][2]), "+f"(acc[7][3]), \
    "+f"(acc[8][0]), "+f"(acc[8][1]), "+f"(acc[8][2]), "+f"(acc[8][3]), \
    "+f"(acc[9][0]), "+f"(acc[9][1]), "+f"(acc[9][2]), "+f"(acc[9][3]), \
    "+f"(acc[10][0]), "+f"(acc[10][1]), "+f"(acc[10][2]), "+f"(acc[10][3]), \
    "+f"(acc[11][0]), "+f"(acc[11][1]), "+f"(acc[11][2]), "+f"(acc[11][3]), \
    "+f"(acc[12][0]), "+f"(acc[12][1]), "+f"(acc[12][2]), "+f"(acc[12][3]), \
    "+f"(acc[13][0]), "+f"(acc[13][1]), "+f"(acc[13][2]), "+f"(acc[13][3]), \
    "+f"(acc[14][0]), "+f"(acc[14][1]), "+f"(acc[14][2]), "+f"(acc[14][3]), \
    "+f"(acc[15][0]), "+f"(acc[15][1]), "+f"(acc[15][2]), "+f"(acc[15][3]), \
    "+f"(acc[16][0]), "+f"(acc[16][1]), "+f"(acc[16][2]), "+f"(acc[16][3]), \
    "+f"(acc[17][0]), "+f"(acc[17][1]), "+f"(acc[17][2]), "+f"(acc[17][3]), \
    "+f"(acc[18][0]), "+f"(acc[18][1]), "+f"(acc[18][2]), "+f"(acc[18][3]), \
    "+f"(acc[19][0]), "+f"(acc[19][1]), "+f"(acc[19][2]), "+f"(acc[19][3]), \
    "+f"(acc[20][0]), "+f"(acc[20][1]), "+f"(acc[20][2]), "+f"(acc[20][3]), \
    "+f"(acc[21][0]), "+f"(acc[21][1]), "+f"(acc[21][2]), "+f"(acc[21][3]), \
    "+f"(acc[22][0]), "+f"(acc[22][1]), "+f"(acc[22][2]), "+f"(acc[22][3]), \
    "+f"(acc[23][0]), "+f"(acc[23][1]), "+f"(acc[23][2]), "+f"(acc[23][3]), \
    "+f"(acc[24][0]), "+f"(acc[24][1]), "+f"(acc[24][2]), "+f"(acc[24][3]), \
    "+f"(acc[25][0]), "+f"(acc[25][1]), "+f"(acc[25][2]), "+f"(acc[25][3]), \
    "+f"(acc[26][0]), "+f"(acc[26][1]), "+f"(acc[26][2]), "+f"(acc[26][3]), \
    "+f"(acc[27][0]), "+f"(acc[27][1]), "+f"(acc[27][2]), "+f"(acc[27][3]), \
    "+f"(acc[28][0]), "+f"(acc[28][1]), "+f"(acc[28][2]), "+f"(acc[28][3]), \
    "+f"(acc[29][0]), "+f"(acc[29][1]), "+f"(acc[29][2]), "+f"(acc[29][3]), \
    "+f"(acc[30][0]), "+f"(acc[30][1]), "+f"(acc[30][2]), "+f"(acc[30][3]), \
    "+f"(acc[31][0]), "+f"(acc[31][1]), "+f"(acc[31][2]), "+f"(acc[31][3])

// acc (64 x 32) = a b (+ acc when accumulate != 0), a and b K-major in shared memory; `shape` is
// the wgmma shape and types, `tail` the operands after the scales (none for FP8).
#define WIDEATTN_WGMMA_SCORES(shape, tail, acc, a_desc, b_desc, accumulate)                              \
    asm volatile("{\n"                                                                               \
                 ".reg .pred accumulate;\n"                                                           \
                 ".reg .b64 a_desc, b_desc;\n"                                                        \
                 "setp.ne.b32 accumulate, %20, 0;\n"                                                  \
                 "mov.b64 a_desc, {%16, %17};\n"                                                     \
                 "mov.b64 b_desc, {%18, %19};\n"                                                     \
                 "wgmma.mma_async.sync.aligned." shape " {" WIDEATTN_ACC16_REGS "}, "                 \
                 "a_desc, b_desc, accumulate, 1, 1" tail ";\n"                                        \
                 "}\n"                                                                               \
                 : WIDEATTN_ACC16_OPERANDS(acc)                                                      \
                 : "r"(a_desc.low), "r"(a_desc.high), "r"(b_desc.low), "r"(b_desc.high), "r"(accumulate))

// acc (64 x 64) = a b (+ acc when accumulate != 0), a and b K-major in shared memory (FP8: no
// transpose operands).
#define WIDEATTN_WGMMA_SCORES64(shape, acc, a_desc, b_desc, accumulate)                                   \
    asm volatile("{\n"                                                                               \
                 ".reg .pred accumulate;\n"                                                           \
                 ".reg .b64 a_desc, b_desc;\n"                                                        \
                 "setp.ne.b32 accumulate, %36, 0;\n"                                                  \
                 "mov.b64 a_desc, {%32, %33};\n"                                                     \
                 "mov.b64 b_desc, {%34, %35};\n"                                                     \
                 "wgmma.mma_async.sync.aligned." shape " {" WIDEATTN_ACC32_REGS "}, "                 \
                 "a_desc, b_desc, accumulate, 1, 1;\n"                                               \
                 "}\n"                                                                               \
                 : WIDEATTN_ACC32_OPERANDS(acc)                                                      \
                 : "r"(a_desc.low), "r"(a_desc.high), "r"(b_desc.low), "r"(b_desc.high), "r"(accumulate))

// acc (64 x 256) += a b, a the thread's fragment of its warp's 16 rows (16-bit pairs of the
// m16n8k16 layout, or e4m3 quads of the m16n8k32 layout), b in shared memory: MN-major
// (transposed, tail ", 1": imm-trans-b) for 16-bit types, K-major for e4m3 (tail "": FP8 wgmma
// has no transpose operand).
#define WIDEATTN_WGMMA_PV(shape, tail, acc, a, b_desc)                                                   \
    asm volatile("{\n"                                                                               \
                 ".reg .pred accumulate;\n"                                                           \
                 ".reg .b64 b_desc;\n"                                                                \
                 "setp.ne.b32 accumulate, %134, 0;\n"                                                 \
                 "mov.b64 b_desc, {%132, %133};\n"                                                   \
                 "wgmma.mma_async.sync.aligned." shape " {\n" WIDEATTN_ACC128_REGS                     \
                 "}, {%128, %129, %130, %131}, b_desc, accumulate, 1, 1" tail ";\n"                    \
                 "}\n"                                                                               \
                 : WIDEATTN_ACC128_OPERANDS(acc)                                                     \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b_desc.low), "r"(b_desc.high), "r"(1))

// acc (64 x 256) += a b with both operands in shared memory; `tail` as in WIDEATTN_WGMMA_SCORES
// (", 0, 0": both K-major 16-bit operands; "" for FP8). wgmma_e4m3alt_d512's partner P V and the
// wgmma rate probes (tools/bench/wgmma_peak_*.cu).
#define WIDEATTN_WGMMA_PV_SS(shape, tail, acc, a_desc, b_desc)                                           \
    asm volatile("{\n"                                                                               \
                 ".reg .pred accumulate;\n"                                                           \
                 ".reg .b64 a_desc, b_desc;\n"                                                        \
                 "setp.ne.b32 accumulate, %132, 0;\n"                                                 \
                 "mov.b64 a_desc, {%128, %129};\n"                                                   \
                 "mov.b64 b_desc, {%130, %131};\n"                                                   \
                 "wgmma.mma_async.sync.aligned." shape " {\n" WIDEATTN_ACC128_REGS                     \
                 "}, a_desc, b_desc, accumulate, 1, 1" tail ";\n"                                      \
                 "}\n"                                                                               \
                 : WIDEATTN_ACC128_OPERANDS(acc)                                                     \
                 : "r"(a_desc.low), "r"(a_desc.high), "r"(b_desc.low), "r"(b_desc.high), "r"(1))

// Scores, bf16: s (64 x 32 fp32) = a b (+ s when accumulate != 0), k16 per instruction.
__device__ __forceinline__ void wgmma_m64n32k16_ss(float (&s)[4][4], hopper::SmemDescriptor a_desc,
                                                   hopper::SmemDescriptor b_desc, int32_t accumulate) {
    WIDEATTN_WGMMA_SCORES("m64n32k16.f32.bf16.bf16", ", 0, 0", s, a_desc, b_desc, accumulate);
}

// Scores, e4m3: k32 per instruction (32 e4m3 = 32 bytes of a 128-byte row); FP8 wgmma has no
// transpose operands (both K-major).
__device__ __forceinline__ void wgmma_m64n32k32_e4m3_ss(float (&s)[4][4], hopper::SmemDescriptor a_desc,
                                                        hopper::SmemDescriptor b_desc, int32_t accumulate) {
    WIDEATTN_WGMMA_SCORES("m64n32k32.f32.e4m3.e4m3", "", s, a_desc, b_desc, accumulate);
}

// Scores of a 64-key tile, e4m3 (wgmma_e4m3alt64_d512): s (64 x 64 fp32, 32 registers) = a b
// (+ s when accumulate != 0), k32 per instruction.
__device__ __forceinline__ void wgmma_m64n64k32_e4m3_ss(float (&s)[8][4], hopper::SmemDescriptor a_desc,
                                                        hopper::SmemDescriptor b_desc, int32_t accumulate) {
    WIDEATTN_WGMMA_SCORES64("m64n64k32.f32.e4m3.e4m3", s, a_desc, b_desc, accumulate);
}

// P V, bf16 P and V: o (64 x 256 fp32) += a b.
__device__ __forceinline__ void wgmma_m64n256k16_rs(float (&o)[32][4], const uint32_t (&a)[4],
                                                    hopper::SmemDescriptor b_desc) {
    WIDEATTN_WGMMA_PV("m64n256k16.f32.bf16.bf16", ", 1", o, a, b_desc);
}

// P V, fp16 P and V (the 8-bit kernel, V converted from e4m3).
__device__ __forceinline__ void wgmma_m64n256k16_f16_rs(float (&o)[32][4], const uint32_t (&a)[4],
                                                        hopper::SmemDescriptor b_desc) {
    WIDEATTN_WGMMA_PV("m64n256k16.f32.f16.f16", ", 1", o, a, b_desc);
}

// P V, e4m3 P and V (k32: 32 keys per instruction): o (64 x 256 fp32) += a b, a four e4m3 per
// register (byte i = element i), b K-major ([dim][key], keys contiguous) without swizzle.
__device__ __forceinline__ void wgmma_m64n256k32_e4m3_rs(float (&o)[32][4], const uint32_t (&a)[4],
                                                         hopper::SmemDescriptor b_desc) {
    WIDEATTN_WGMMA_PV("m64n256k32.f32.e4m3.e4m3", "", o, a, b_desc);
}

// P V, e4m3 P and V, P from shared memory (wgmma_e4m3alt_d512: the partner warpgroup's P tile,
// K-major without swizzle): o (64 x 256 fp32) += a b.
__device__ __forceinline__ void wgmma_m64n256k32_e4m3_ss(float (&o)[32][4], hopper::SmemDescriptor a_desc,
                                                         hopper::SmemDescriptor b_desc) {
    WIDEATTN_WGMMA_PV_SS("m64n256k32.f32.e4m3.e4m3", "", o, a_desc, b_desc);
}

}  // namespace wideattn::ptx
