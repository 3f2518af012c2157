// stream_read.cu - read-only streaming probe for `wideattn bench`: the bandwidth a kernel can
// read global memory at (16-byte non-coherent loads, several in flight per thread, grid-stride),
// the ceiling decode kernels are compared with beside the copy bandwidth. The words read are
// XORed into one value per block that is stored, so no load is dead; the host fills the buffer
// with pseudo-random bytes (never zeros) outside timing.
#include <cstdint>

#include "tools/bench/probe_shapes.h"

namespace {
using namespace wideattn::probe;

__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }
}  // namespace

extern "C" __global__ void __launch_bounds__(kStreamThreads) wideattn_stream_read(const uint4* __restrict__ data,
                                                                                uint64_t vectors, uint32_t* out) {
    const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
    uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
    uint32_t acc = 0;
    for (; i + (kStreamLoadsInFlight - 1) * stride < vectors; i += kStreamLoadsInFlight * stride) {
        uint4 v[kStreamLoadsInFlight];
#pragma unroll
        for (int u = 0; u < kStreamLoadsInFlight; ++u) v[u] = __ldg(data + i + u * stride);
#pragma unroll
        for (int u = 0; u < kStreamLoadsInFlight; ++u) acc ^= fold(v[u]);
    }
    for (; i < vectors; i += stride) acc ^= fold(__ldg(data + i));
    for (int offset = kWarpThreads / 2; offset > 0; offset /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, offset);
    __shared__ uint32_t warp_acc[kStreamThreads / kWarpThreads];
    if (threadIdx.x % kWarpThreads == 0) warp_acc[threadIdx.x / kWarpThreads] = acc;
    __syncthreads();
    if (threadIdx.x != 0) return;
    uint32_t block_acc = 0;
    for (int w = 0; w < kStreamThreads / kWarpThreads; ++w) block_acc ^= warp_acc[w];
    out[blockIdx.x] = block_acc;
}
