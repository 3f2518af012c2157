// probe_shapes.h - launch shapes and work counts of the ceiling probes of tools/bench/ that
// `wideattn bench` counts bytes and FLOPs from (stream_read.cu, wgmma_peak_e4m3.cu,
// wgmma_peak_bf16.cu): one definition for the probes and for tools/cli/bench.cpp.
#pragma once

#include <cstdint>

namespace wideattn::probe {

// stream_read.cu: a grid-stride read of 16-byte vectors, several loads in flight per thread.
constexpr int kStreamThreads = 256;
constexpr int kStreamBlocksPerSm = 8;        // 2048 threads per SM: full occupancy on sm_80 .. sm_120
constexpr int kStreamLoadsInFlight = 4;      // independent 16-byte loads per thread and step
constexpr int kStreamVectorBytes = 16;
constexpr int kWarpThreads = 32;

// wgmma_peak_*.cu: two warpgroups per block, one block per SM, each warpgroup issuing
// kWgmmaStepsPerGroup m64n256 wgmmas (one 128-byte slab of K) per commit group.
constexpr int kWarpgroupThreads = 128;
constexpr int kWgmmaWarpgroups = 2;
constexpr int kWgmmaThreads = kWgmmaWarpgroups * kWarpgroupThreads;
constexpr int kWgmmaM = 64;
constexpr int kWgmmaN = 256;
constexpr int kWgmmaKE4m3 = 32;              // m64n256k32 e4m3: 32 bytes of a row per wgmma
constexpr int kWgmmaKBf16 = 16;              // m64n256k16 bf16: 32 bytes of a row per wgmma
constexpr int kWgmmaRowBytes = 128;          // one 128-byte-swizzled slab row of A and B
constexpr int kWgmmaStepBytes = 32;
constexpr int kWgmmaStepsPerGroup = kWgmmaRowBytes / kWgmmaStepBytes;
constexpr int kWgmmaVecBytes = 16;
constexpr int kWgmmaAtomBytes = 8 * kWgmmaRowBytes;  // 8-row swizzle atom
constexpr int kWgmmaABytes = kWgmmaM * kWgmmaRowBytes;        // per warpgroup
constexpr int kWgmmaBBytes = kWgmmaN * kWgmmaRowBytes;        // shared by both warpgroups
constexpr int kWgmmaSharedBytes = kWgmmaWarpgroups * kWgmmaABytes + kWgmmaBBytes;  // 48 KiB: static

}  // namespace wideattn::probe
