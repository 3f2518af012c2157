// ptx_mma.cuh - thin device wrappers over the PTX the mma tier is built from (and that the
// Hopper tier reuses for its Q loads, barriers and shared-memory exchange): cp.async (16-byte,
// zero-fill), the L2 prefetch of a line, ldmatrix (plain and transposed), mma.sync m16n8k16 BF16
// and f16 and m16n8k32 e4m3 with fp32 accumulation, named barriers, shared-memory float4 stores
// and loads, and bf16x2 packing and unpacking.
// Valid on sm_80 and newer; the e4m3 mma on sm_89 and newer.
#pragma once

#include <cstdint>
#include <cuda_bf16.h>

namespace wideattn::ptx {

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// Copies 16 bytes global -> shared, bypassing L1; src_bytes == 0 writes 16 zero bytes.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, uint32_t src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}

// cp_async_16 of a whole vector (no zero fill).
__device__ __forceinline__ void cp_async_16_full(uint32_t dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

// Asks the L2 for the 128-byte line holding `address` (prefetch.global.L2): nothing is read into a
// register and nothing waits for it.
__device__ __forceinline__ void prefetch_l2(const void* address) {
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(address));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(address));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}

// d += a * b for one m16n8k16 tile (a row-major 16x16, b column-major 16x8).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The same with f16 operands.
__device__ __forceinline__ void mma_f16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d += a * b for one m16n8k32 tile (a row-major 16x32 e4m3, b column-major 32x8 e4m3; sm_89+).
__device__ __forceinline__ void mma_e4m3_16832(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Re-joins the lanes of a warp after a branch only some of them took (the lane-0 copy issue of
// the Hopper kernels). wgmma instructions must be executed by every warp of a warpgroup at the
// same instruction, and bar.sync / bar.arrive count whole warps; a lane left on its own path
// reaches them at another instruction (compute-sanitizer synccheck: "mismatching warpgroup
// instruction pc"; racecheck: hazards across a barrier the lane seemed to have passed).
__device__ __forceinline__ void converge_warp() { __syncwarp(); }

// Barrier over `threads` threads (a multiple of 32) using hardware barrier `id` (1..15;
// 0 is __syncthreads).
__device__ __forceinline__ void named_barrier_sync(uint32_t id, uint32_t threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// named_barrier_sync for threads that reach it at different instructions (barrier.sync without
// .aligned; bar.sync is barrier.sync.aligned, which requires every thread to execute the same
// barrier instruction: compute-sanitizer's synccheck reports "Divergent thread(s) in block"
// otherwise). The warp must still be converged.
__device__ __forceinline__ void named_barrier_sync_unaligned(uint32_t id, uint32_t threads) {
    asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Arrival of this thread at hardware barrier `id` (counting `threads` in all, arrivals and
// syncs), without waiting: the producer half of a producer/consumer hand-off whose consumers
// call named_barrier_sync with the same count; the thread's earlier shared-memory writes are
// visible to them past their sync.
__device__ __forceinline__ void named_barrier_arrive(uint32_t id, uint32_t threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void store_shared_f32x4(uint32_t address, float x, float y, float z, float w) {
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "f"(x), "f"(y), "f"(z), "f"(w)
                 : "memory");
}

__device__ __forceinline__ void store_shared_f32(uint32_t address, float x) {
    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(address), "f"(x) : "memory");
}

__device__ __forceinline__ float load_shared_f32(uint32_t address) {
    float x;
    asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(x) : "r"(address) : "memory");
    return x;
}

__device__ __forceinline__ void store_shared_u32(uint32_t address, uint32_t x) {
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(x) : "memory");
}

__device__ __forceinline__ uint32_t load_shared_u32(uint32_t address) {
    uint32_t x;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(x) : "r"(address) : "memory");
    return x;
}

__device__ __forceinline__ float2 load_shared_f32x2(uint32_t address) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(address) : "memory");
    return v;
}

__device__ __forceinline__ float4 load_shared_f32x4(uint32_t address) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(address)
                 : "memory");
    return v;
}

// The low and the high bf16 of a 32-bit word, as floats (exact).
__device__ __forceinline__ float bf16_low(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float bf16_high(uint32_t word) { return __uint_as_float(word & 0xffff0000u); }

__device__ __forceinline__ uint32_t pack_bf16x2(float low, float high) {
    const __nv_bfloat162 packed = __floats2bfloat162_rn(low, high);
    return *reinterpret_cast<const uint32_t*>(&packed);
}

// bf16x2 arithmetic (sm_90): each half the exact result rounded once to bf16, to nearest even.
// For bf16 operands this is the fp32 operation followed by a rounding to bf16 (a product of two
// bf16 values is exact in fp32; for a sum, fp32's 24 bits are at least 2 x 8 + 2, so rounding
// twice gives the bits of rounding once), NaN payloads aside.
__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
__device__ __forceinline__ uint32_t add_bf16x2(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("add.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
__device__ __forceinline__ uint32_t sub_bf16x2(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("sub.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

}  // namespace wideattn::ptx
