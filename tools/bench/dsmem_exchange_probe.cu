// dsmem_exchange_probe.cu - cycles of a partial-score exchange between the two CTAs of a cluster, as
// wgmma_bf16c2_d512 does it (st.async of fp32 into the partner's shared memory completing on its
// mbarrier, an acquiring cluster-scope try_wait, reads of the received tile, the re-arm), without
// any other work. Modes: "pingpong" (one warpgroup of rank 0 and of rank 1 alternate: one-way
// latency = half a round trip), "exchange" (both CTAs post and wait every step, as the kernel:
// cycles per step), with 1 or 2 warpgroups per CTA exchanging at once, a tile of BYTES per
// warpgroup, one cluster alone or 66 clusters (every SM).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

constexpr int kGroupThreads = 128;
constexpr int kMaxBytes = 8192;
constexpr int kParities = 2;
constexpr int kPadBytes = 160 * 1024;

__device__ __forceinline__ uint32_t rank_in_cluster() { uint32_t r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
__device__ __forceinline__ uint32_t mapa(uint32_t a, uint32_t r) { uint32_t m; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(r)); return m; }
__device__ __forceinline__ void cluster_sync() { asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ __forceinline__ void arm(uint32_t bar, uint32_t bytes) { asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory"); }
__device__ __forceinline__ void wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    do { asm volatile("{.reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p;}" : "=r"(done) : "r"(bar), "r"(parity) : "memory"); } while (!done);
}
__device__ __forceinline__ void post(uint32_t remote, uint32_t remote_bar, float v, int vecs) {
    for (int i = 0; i < vecs; ++i)
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %1, %1, %1}, [%2];" :: "r"(remote + i * kGroupThreads * 16), "r"(__float_as_uint(v)), "r"(remote_bar) : "memory");
}

// kPingPong: only warpgroup 0; rank 0 posts, rank 1 waits then posts back, `steps` round trips.
// Else every step: each active warpgroup posts its tile into the partner, waits for the partner's, reads it.
template <bool kPingPong>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 1) probe(int bytes, int groups, int steps, long long* cycles, float* sink) {
    __shared__ alignas(16) float buf[2][kParities][kMaxBytes / 4];
    __shared__ alignas(8) uint64_t bar[2][kParities];
    const uint32_t r = rank_in_cluster();
    const int g = threadIdx.x / kGroupThreads, t = threadIdx.x % kGroupThreads;
    const int vecs = bytes / (kGroupThreads * 16);
    if (threadIdx.x == 0) {
        for (int i = 0; i < 2; ++i) for (int p = 0; p < kParities; ++p) {
            const uint32_t b = (uint32_t)__cvta_generic_to_shared(&bar[i][p]);
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
            if (p < steps) arm(b, bytes);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_sync();
    float acc = 0.0f;
    long long t0 = clock64();
    if (g < groups) {
        for (int s = 0; s < steps; ++s) {
            const int p = s % kParities;
            const uint32_t own_bar = (uint32_t)__cvta_generic_to_shared(&bar[g][p]);
            const uint32_t remote = mapa((uint32_t)__cvta_generic_to_shared(&buf[g][p][t * 4]), r ^ 1);
            const uint32_t remote_bar = mapa(own_bar, r ^ 1);
            if (kPingPong) {
                if (r == 1) { wait(own_bar, (s / kParities) & 1); acc += buf[g][p][t * 4]; if (t == 0 && s + kParities < steps) arm(own_bar, bytes); }
                post(remote, remote_bar, acc + s, vecs);
                if (r == 0) { wait(own_bar, (s / kParities) & 1); acc += buf[g][p][t * 4]; if (t == 0 && s + kParities < steps) arm(own_bar, bytes); }
            } else {
                post(remote, remote_bar, acc + s, vecs);
                wait(own_bar, (s / kParities) & 1);
                for (int i = 0; i < vecs; ++i) acc += buf[g][p][t * 4 + i * kGroupThreads * 4];
                if (t == 0 && s + kParities < steps) arm(own_bar, bytes);
            }
        }
    }
    long long t1 = clock64();
    if (t == 0 && g == 0) cycles[blockIdx.x] = t1 - t0;
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    cluster_sync();
}

int main() {
    const int steps = 4096;
    long long* d_cycles; float* d_sink;
    cudaMalloc(&d_cycles, 132 * sizeof(long long)); cudaMalloc(&d_sink, 132 * 256 * sizeof(float));
    long long h[132];
    // Dynamic shared memory the kernel does not touch, so that one CTA fills an SM (132 CTAs, 132 SMs).
    cudaFuncSetAttribute(probe<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPadBytes);
    cudaFuncSetAttribute(probe<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kPadBytes);
    int clock_khz = 0; cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    printf("max SM clock %d kHz (cycles below are SM clocks, clock64)\n", clock_khz);
    printf("mode      bytes groups clusters  cycles/step(median over CTAs)  min  max\n");
    for (int mode = 0; mode < 2; ++mode)
        for (int groups = 1; groups <= (mode == 0 ? 1 : 2); ++groups)
            for (int bytes : {2048, 4096, 8192})
                for (int clusters : {1, 66}) {
                    for (int rep = 0; rep < 2; ++rep) {  // the first launch warms up
                        if (mode == 0) probe<true><<<clusters * 2, 256, kPadBytes>>>(bytes, groups, steps, d_cycles, d_sink);
                        else probe<false><<<clusters * 2, 256, kPadBytes>>>(bytes, groups, steps, d_cycles, d_sink);
                    }
                    cudaError_t e = cudaDeviceSynchronize();
                    if (e != cudaSuccess) { printf("error: %s\n", cudaGetErrorString(e)); return 1; }
                    cudaMemcpy(h, d_cycles, clusters * 2 * sizeof(long long), cudaMemcpyDeviceToHost);
                    double v[132]; int n = clusters * 2;
                    for (int i = 0; i < n; ++i) v[i] = (double)h[i] / steps;
                    for (int i = 0; i < n; ++i) for (int j = i + 1; j < n; ++j) if (v[j] < v[i]) { double x = v[i]; v[i] = v[j]; v[j] = x; }
                    printf("%-9s %5d %6d %8d  %10.1f  %8.1f %8.1f\n", mode == 0 ? "pingpong" : "exchange", bytes, groups, clusters, v[n / 2], v[0], v[n - 1]);
                }
    return 0;
}
