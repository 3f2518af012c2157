// quantize_check.cpp - see quantize_check.h.
#include "tools/harness/quantize_check.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "accuracy/bf16.h"
#include "fp8/codec/quantize_reference.h"

namespace wideattn {
namespace {

constexpr int32_t kTokens = 37;  // not a multiple of anything
constexpr int32_t kHeads = 4;
constexpr int32_t kHeadDim = 512;
constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 5;
constexpr unsigned char kCachePoison = 0xA5;
constexpr float kInputStd = 3.0f;
constexpr float kSaturatingValue = 1e4f;
constexpr float kAmaxFraction = 0.25f;  // scale for a quarter of amax: the outlier saturates

}  // namespace

QuantizeCaseResult run_quantize_case(const GpuSession& gpu, wideattn_context* ctx, uint64_t seed) {
    QuantizeCaseResult result;
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, kInputStd);
    std::vector<uint16_t> src(static_cast<size_t>(kTokens) * kHeads * kHeadDim);
    for (auto& x : src) x = float_to_bf16(normal(rng));
    src[5] = float_to_bf16(NAN);
    src[src.size() / 3] = float_to_bf16(-INFINITY);
    src[src.size() / 2] = float_to_bf16(kSaturatingValue);
    std::vector<int64_t> slots(static_cast<size_t>(kNumBlocks) * kBlockSize);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(kTokens);
    slots[3] = -1;  // padding tokens write nothing
    slots[20] = -1;
    int64_t nonfinite = 0, first_nonfinite = -1;
    const float amax = fp8::bf16_amax(src.data(), static_cast<int64_t>(src.size()), &nonfinite, &first_nonfinite);
    const float scale = fp8::e4m3_scale_for_amax(amax * kAmaxFraction);

    fp8::CacheLayout layout;
    layout.num_blocks = kNumBlocks;
    layout.block_size = kBlockSize;
    layout.head_stride = kHeadDim;
    layout.slot_stride = int64_t{kHeads} * kHeadDim;
    layout.block_stride = kBlockSize * layout.slot_stride;
    std::vector<uint8_t> want(static_cast<size_t>(kNumBlocks * layout.block_stride), kCachePoison);
    fp8::QuantizeReport report;
    result.error = fp8::quantize_to_cache_reference(src.data(), kTokens, kHeads, kHeadDim, layout.slot_stride,
                                                    kHeadDim, slots.data(), scale, layout, want.data(), &report);
    if (!result.error.empty()) return result;
    result.nonfinite_reference = report.nonfinite;
    result.saturated = report.saturated;

    DeviceBuffer d_src, d_cache, d_slots, d_scale, d_count;
    std::string& err = result.error;
    if (err.empty()) err = d_src.allocate(gpu, src.size() * sizeof(uint16_t));
    if (err.empty()) err = d_src.upload(src.data(), src.size() * sizeof(uint16_t));
    if (err.empty()) err = d_cache.allocate(gpu, want.size());
    if (err.empty()) err = d_cache.fill(kCachePoison);
    if (err.empty()) err = d_slots.allocate(gpu, slots.size() * sizeof(int64_t));
    if (err.empty()) err = d_slots.upload(slots.data(), slots.size() * sizeof(int64_t));
    if (err.empty()) err = d_scale.allocate(gpu, sizeof(float));
    if (err.empty()) err = d_scale.upload(&scale, sizeof(float));
    if (err.empty()) err = d_count.allocate(gpu, sizeof(int32_t));
    if (err.empty()) err = d_count.fill(0);
    if (!err.empty()) return result;

    wideattn_quantize_params p{};
    p.src = d_src.get();
    p.src_token_stride = layout.slot_stride;
    p.src_head_stride = kHeadDim;
    p.cache = d_cache.get();
    p.cache_block_stride = layout.block_stride;
    p.cache_slot_stride = layout.slot_stride;
    p.cache_head_stride = layout.head_stride;
    p.slot_mapping = static_cast<const int64_t*>(d_slots.get());
    p.scale = static_cast<const float*>(d_scale.get());
    p.nonfinite_count = static_cast<int32_t*>(d_count.get());
    p.tokens = kTokens;
    p.heads = kHeads;
    p.head_dim = kHeadDim;
    p.block_size = kBlockSize;
    p.num_blocks = kNumBlocks;
    p.src_dtype = WIDEATTN_DTYPE_BF16;
    const wideattn_status status = wideattn_quantize_to_cache(ctx, &p, nullptr);
    if (status != WIDEATTN_OK) {
        err = std::string(wideattn_status_string(status)) + ": " + wideattn_last_error();
        return result;
    }
    if ((err = gpu.check(gpu.driver().cuCtxSynchronize(), "quantize kernel execution")).size()) return result;
    for (int32_t i = 0; i < wideattn_kernel_count(ctx); ++i) {
        wideattn_kernel_info info{};
        wideattn_get_kernel_info(ctx, i, &info);
        if (std::string(info.kind) == "quantize_e4m3") result.kernel = info.name;
    }
    std::vector<uint8_t> got(want.size());
    if ((err = d_cache.download(got.data(), got.size())).size()) return result;
    if ((err = d_count.download(&result.nonfinite_device, sizeof(int32_t))).size()) return result;
    result.cache_bytes = static_cast<int64_t>(got.size());
    for (size_t i = 0; i < got.size(); ++i) result.mismatches += got[i] != want[i];
    return result;
}

}  // namespace wideattn
