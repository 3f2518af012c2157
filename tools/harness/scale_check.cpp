// scale_check.cpp - see scale_check.h.
#include "tools/harness/scale_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "accuracy/bf16.h"
#include "fp8/codec/e4m3.h"
#include "fp8/codec/quantize_reference.h"
#include "kernels/common/kernel_desc.h"
#include "tools/harness/checks.h"

namespace wideattn {
namespace {

constexpr int32_t kTokens = 45;   // not a multiple of the amax kernel's 16 tokens per block
constexpr int32_t kKvHeads = 4;
constexpr int32_t kQHeads = 9;    // 9 x 512 elements: a partial last block along grid.y
constexpr int32_t kHeadDim = 512;
constexpr int64_t kSrcRowGap = 64;      // elements between one token's last head and the next token
constexpr int64_t kDstHeadGap = 16;     // bytes between Q head rows in the flat destination
constexpr int64_t kDstTokenGap = 32;    // bytes after each Q token row
constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 4;       // 64 slots for 45 tokens
constexpr int32_t kPaddingTokens[] = {5, 17};
constexpr unsigned char kCachePoison = 0xA5;
constexpr unsigned char kScalePoison = 0xFF;  // NaN: a scale the kernel failed to write shows
constexpr float kInputStd = 3.0f;
constexpr float kGapValue = 1e30f;      // between rows: would dominate the amax if read
constexpr float kOutlier = 5e4f;        // in a padding token: must not raise the scale
constexpr float kSaturatingValue = 1e4f;
constexpr float kGivenScaleFraction = 0.25f;  // a quarter of the amax scale: the large inputs saturate

struct Tensor {
    std::vector<uint16_t> bits;
    int64_t token_stride = 0;
    int32_t tokens = 0, heads = 0;
    uint16_t& at(int64_t t, int64_t h, int64_t d) { return bits[t * token_stride + h * kHeadDim + d]; }
};

Tensor random_tensor(std::mt19937_64& rng, int32_t tokens, int32_t heads) {
    Tensor x;
    x.tokens = tokens;
    x.heads = heads;
    x.token_stride = int64_t{heads} * kHeadDim + kSrcRowGap;
    x.bits.assign(static_cast<size_t>(tokens * x.token_stride), float_to_bf16(kGapValue));
    std::normal_distribution<float> normal(0.0f, kInputStd);
    for (int32_t t = 0; t < tokens; ++t)
        for (int32_t h = 0; h < heads; ++h)
            for (int32_t d = 0; d < kHeadDim; ++d) x.at(t, h, d) = float_to_bf16(normal(rng));
    return x;
}

std::string hex_bits(float value) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", value, fp8::float_bits(value));
    return buf;
}

class Checker {
public:
    Checker(const GpuDevice& gpu, wideattn_context* ctx, ScaleCaseResult* result)
        : gpu_(gpu), ctx_(ctx), r_(result) {}

    void expect(bool equal, const std::string& what) {
        ++r_->comparisons;
        if (!equal) r_->failures.push_back(what);
    }
    // Uploads a tensor; "" or an error.
    std::string upload(const Tensor& x, DeviceBuffer* d) {
        std::string err = d->allocate(gpu_, x.bits.size() * sizeof(uint16_t));
        if (err.empty()) err = d->upload(x.bits.data(), x.bits.size() * sizeof(uint16_t));
        return err;
    }
    std::string sync(const char* what) { return gpu_.check(gpu_.driver().cuCtxSynchronize(), what); }
    std::string status_text(wideattn_status status) {
        return status == WIDEATTN_OK ? std::string()
                                     : std::string(wideattn_status_string(status)) + ": " + wideattn_last_error();
    }
    // Poisons the scale and zeroes the counter, runs compute_scale (compute_scale_pow2 with
    // power_of_two) and waits; "" or an error.
    std::string compute_scale(wideattn_scale_params p, DeviceBuffer& scale, DeviceBuffer& count, float* out,
                              int32_t* nonfinite, bool power_of_two = false) {
        std::string err = scale.fill(kScalePoison);
        if (err.empty()) err = count.fill(0);
        if (!err.empty()) return err;
        p.scale = static_cast<float*>(scale.get());
        p.nonfinite_count = static_cast<int32_t*>(count.get());
        const wideattn_status status =
            power_of_two ? wideattn_compute_scale_pow2(ctx_, &p, nullptr) : wideattn_compute_scale(ctx_, &p, nullptr);
        if (!(err = status_text(status)).empty()) return err;
        if (!(err = sync("amax kernel execution")).empty()) return err;
        if (!(err = scale.download(out, sizeof(float))).empty()) return err;
        return count.download(nonfinite, sizeof(int32_t));
    }
    void expect_scale(float device, float reference, const std::string& what) {
        expect(fp8::float_bits(device) == fp8::float_bits(reference),
               what + ": device scale " + hex_bits(device) + ", reference " + hex_bits(reference));
    }
    void expect_count(int32_t device, int64_t reference, const std::string& what) {
        expect(device == reference, what + ": device NaN/inf count " + std::to_string(device) + ", reference " +
                                        std::to_string(reference));
    }
    void expect_bytes(const std::vector<uint8_t>& device, const std::vector<uint8_t>& reference,
                      const std::string& what) {
        int64_t differ = 0, first = -1;
        for (size_t i = 0; i < device.size(); ++i)
            if (device[i] != reference[i] && differ++ == 0) first = static_cast<int64_t>(i);
        expect(differ == 0, what + ": " + std::to_string(differ) + " of " + std::to_string(device.size()) +
                                " bytes differ from the CPU reference (first at byte " + std::to_string(first) + ")");
    }

private:
    const GpuDevice& gpu_;
    wideattn_context* ctx_;
    ScaleCaseResult* r_;
};

wideattn_scale_params scale_params(const Tensor& x, const DeviceBuffer& src, const int64_t* slot_mapping) {
    wideattn_scale_params p{};
    p.src = src.get();
    p.src_token_stride = x.token_stride;
    p.src_head_stride = kHeadDim;
    p.slot_mapping = slot_mapping;
    p.tokens = x.tokens;
    p.heads = x.heads;
    p.head_dim = kHeadDim;
    p.src_dtype = WIDEATTN_DTYPE_BF16;
    return p;
}

// K with a NaN and a -inf, and its shuffled slots: two padding tokens (-1), one holding an
// outlier and one a NaN that must not count.
std::vector<int64_t> k_with_slots(std::mt19937_64& rng, Tensor* k) {
    *k = random_tensor(rng, kTokens, kKvHeads);
    k->at(2, 1, 7) = float_to_bf16(NAN);
    k->at(30, 3, 100) = float_to_bf16(-INFINITY);
    std::vector<int64_t> slots(static_cast<size_t>(kNumBlocks) * kBlockSize);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(kTokens);
    for (int32_t t : kPaddingTokens) slots[t] = -1;
    k->at(kPaddingTokens[0], 0, 0) = float_to_bf16(kOutlier);
    k->at(kPaddingTokens[1], 2, 9) = float_to_bf16(NAN);
    return slots;
}

fp8::CacheLayout k_cache_layout() {
    fp8::CacheLayout layout;
    layout.num_blocks = kNumBlocks;
    layout.block_size = kBlockSize;
    layout.head_stride = kHeadDim;
    layout.slot_stride = int64_t{kKvHeads} * kHeadDim;
    layout.block_stride = kBlockSize * layout.slot_stride;
    return layout;
}

// Part 1's device side: K, its slots, the scale and both kernels' NaN/inf counters, the cache.
struct KBuffers {
    DeviceBuffer src, slots, scale, scale_count, cache, quant_count;
};

// Uploads K and the slots, poisons the scale and the cache, zeroes the counters.
std::string upload_k(const GpuDevice& gpu, Checker& c, const Tensor& k, const std::vector<int64_t>& slots,
                     size_t cache_bytes, KBuffers* d) {
    std::string err = c.upload(k, &d->src);
    if (err.empty()) err = d->slots.allocate(gpu, slots.size() * sizeof(int64_t));
    if (err.empty()) err = d->slots.upload(slots.data(), slots.size() * sizeof(int64_t));
    if (err.empty()) err = d->scale.allocate(gpu, sizeof(float));
    if (err.empty()) err = d->scale.fill(kScalePoison);
    if (err.empty()) err = d->scale_count.allocate(gpu, sizeof(int32_t));
    if (err.empty()) err = d->scale_count.fill(0);
    if (err.empty()) err = d->cache.allocate(gpu, cache_bytes);
    if (err.empty()) err = d->cache.fill(kCachePoison);
    if (err.empty()) err = d->quant_count.allocate(gpu, sizeof(int32_t));
    if (err.empty()) err = d->quant_count.fill(0);
    return err;
}

// K into the cache with the scale the amax launch writes on the device.
wideattn_quantize_params k_quantize_params(const Tensor& k, const fp8::CacheLayout& layout, const KBuffers& d) {
    wideattn_quantize_params qp{};
    qp.src = d.src.get();
    qp.src_token_stride = k.token_stride;
    qp.src_head_stride = kHeadDim;
    qp.cache = d.cache.get();
    qp.cache_block_stride = layout.block_stride;
    qp.cache_slot_stride = layout.slot_stride;
    qp.cache_head_stride = layout.head_stride;
    qp.slot_mapping = static_cast<const int64_t*>(d.slots.get());
    qp.scale = static_cast<const float*>(d.scale.get());  // no host round trip
    qp.nonfinite_count = static_cast<int32_t*>(d.quant_count.get());
    qp.tokens = kTokens;
    qp.heads = kKvHeads;
    qp.head_dim = kHeadDim;
    qp.block_size = kBlockSize;
    qp.num_blocks = kNumBlocks;
    qp.src_dtype = WIDEATTN_DTYPE_BF16;
    return qp;
}

// Part 1: K into the paged cache with a scale the GPU computed, two launches on one stream.
std::string amax_then_quantize(const GpuDevice& gpu, Checker& c, wideattn_context* ctx, std::mt19937_64& rng,
                               ScaleCaseResult* r) {
    Tensor k;
    const std::vector<int64_t> slots = k_with_slots(rng, &k);
    fp8::ScaleReport want_scale;
    std::string err = fp8::scale_reference(k.bits.data(), kTokens, kKvHeads, kHeadDim, k.token_stride, kHeadDim,
                                           slots.data(), &want_scale);
    if (!err.empty()) return err;
    const fp8::CacheLayout layout = k_cache_layout();
    std::vector<uint8_t> want_cache(static_cast<size_t>(kNumBlocks * layout.block_stride), kCachePoison);
    fp8::QuantizeReport want_quant;
    err = fp8::quantize_to_cache_reference(k.bits.data(), kTokens, kKvHeads, kHeadDim, k.token_stride, kHeadDim,
                                           slots.data(), want_scale.scale, layout, want_cache.data(), &want_quant);
    if (!err.empty()) return err;
    r->nonfinite_inputs = want_scale.nonfinite;

    KBuffers d;
    if (!(err = upload_k(gpu, c, k, slots, want_cache.size(), &d)).empty()) return err;
    wideattn_scale_params sp = scale_params(k, d.src, static_cast<const int64_t*>(d.slots.get()));
    sp.scale = static_cast<float*>(d.scale.get());
    sp.nonfinite_count = static_cast<int32_t*>(d.scale_count.get());
    const wideattn_quantize_params qp = k_quantize_params(k, layout, d);
    if (!(err = c.status_text(wideattn_compute_scale(ctx, &sp, nullptr))).empty()) return err;
    if (!(err = c.status_text(wideattn_quantize_to_cache(ctx, &qp, nullptr))).empty()) return err;
    if (!(err = c.sync("amax + quantise kernel execution")).empty()) return err;

    float scale = 0.0f;
    int32_t scale_count = -1, quant_count = -1;
    std::vector<uint8_t> cache(want_cache.size());
    if (!(err = d.scale.download(&scale, sizeof scale)).empty()) return err;
    if (!(err = d.scale_count.download(&scale_count, sizeof scale_count)).empty()) return err;
    if (!(err = d.quant_count.download(&quant_count, sizeof quant_count)).empty()) return err;
    if (!(err = d.cache.download(cache.data(), cache.size())).empty()) return err;
    r->scale_bits = fp8::float_bits(scale);
    c.expect_scale(scale, want_scale.scale, "K amax (strided, padding tokens skipped)");
    c.expect_count(scale_count, want_scale.nonfinite, "K amax");
    c.expect_bytes(cache, want_cache, "K quantised into the paged cache with the device scale");
    c.expect_count(quant_count, want_quant.nonfinite, "K quantise");

    // Deterministic: a second run gives the same bits.
    float again = 0.0f;
    int32_t again_count = -1;
    if (!(err = c.compute_scale(sp, d.scale, d.scale_count, &again, &again_count)).empty()) return err;
    c.expect_scale(again, scale, "K amax, second run against the first");
    if (!r->pow2_kernel.empty()) {
        float pow2 = 0.0f;
        int32_t pow2_count = -1;
        err = c.compute_scale(sp, d.scale, d.scale_count, &pow2, &pow2_count, true);
        if (!err.empty()) return err;
        c.expect_scale(pow2, fp8::e4m3_power_of_two_scale(want_scale.scale),
                       "K amax rounded up to a power of two (compute_scale_pow2)");
        c.expect_count(pow2_count, want_scale.nonfinite, "K amax, power of two");
    }
    return {};
}

// Part 2: Q's amax, and Q into a flat strided destination with given scales (saturating; 2^-126,
// where x / scale overflows float).
std::string flat_q(const GpuDevice& gpu, Checker& c, wideattn_context* ctx, std::mt19937_64& rng,
                   ScaleCaseResult* r) {
    Tensor q = random_tensor(rng, kTokens, kQHeads);
    q.at(0, 8, 511) = float_to_bf16(NAN);
    q.at(11, 4, 64) = float_to_bf16(INFINITY);
    q.at(44, 0, 0) = float_to_bf16(-kSaturatingValue);
    q.at(23, 6, 300) = float_to_bf16(kSaturatingValue);
    q.at(12, 2, 8) = float_to_bf16(0.0f);
    fp8::ScaleReport amax;
    std::string err =
        fp8::scale_reference(q.bits.data(), kTokens, kQHeads, kHeadDim, q.token_stride, kHeadDim, nullptr, &amax);
    if (!err.empty()) return err;
    const int64_t dst_head_stride = kHeadDim + kDstHeadGap;
    const int64_t dst_token_stride = kQHeads * dst_head_stride + kDstTokenGap;
    const size_t dst_bytes = static_cast<size_t>(kTokens * dst_token_stride);

    DeviceBuffer d_src, d_dst, d_scale, d_count;
    err = c.upload(q, &d_src);
    if (err.empty()) err = d_dst.allocate(gpu, dst_bytes);
    if (err.empty()) err = d_scale.allocate(gpu, sizeof(float));
    if (err.empty()) err = d_count.allocate(gpu, sizeof(int32_t));
    if (!err.empty()) return err;

    // Q's own amax on the GPU: 9 heads leave the last block along grid.y partly empty.
    float q_scale = 0.0f;
    int32_t q_scale_count = -1;
    err = c.compute_scale(scale_params(q, d_src, nullptr), d_scale, d_count, &q_scale, &q_scale_count);
    if (!err.empty()) return err;
    c.expect_scale(q_scale, amax.scale, "Q amax (every token)");
    c.expect_count(q_scale_count, amax.nonfinite, "Q amax");

    const struct {
        float scale;
        const char* label;
    } scales[] = {{amax.scale * kGivenScaleFraction, "Q flat, a quarter of the amax scale (saturating)"},
                  {fp8::kE4m3MinScale, "Q flat, scale 2^-126 (x / scale overflows float, saturates)"}};
    for (const auto& s : scales) {
        std::vector<uint8_t> want(dst_bytes, kCachePoison);
        fp8::QuantizeReport report;
        err = fp8::quantize_flat_reference(q.bits.data(), kTokens, kQHeads, kHeadDim, q.token_stride, kHeadDim, s.scale,
                                           dst_token_stride, dst_head_stride, want.data(), &report);
        if (!err.empty()) return err;
        if (&s == &scales[0]) r->saturated_q = report.saturated;
        if (!(err = d_dst.fill(kCachePoison)).empty()) return err;
        if (!(err = d_count.fill(0)).empty()) return err;
        if (!(err = d_scale.upload(&s.scale, sizeof(float))).empty()) return err;
        wideattn_quantize_params p{};
        p.src = d_src.get();
        p.src_token_stride = q.token_stride;
        p.src_head_stride = kHeadDim;
        p.cache = d_dst.get();
        p.cache_block_stride = dst_token_stride;
        p.cache_slot_stride = dst_token_stride;  // unused with one slot per block
        p.cache_head_stride = dst_head_stride;
        p.slot_mapping = nullptr;  // slot = token: the flat destination
        p.scale = static_cast<const float*>(d_scale.get());
        p.nonfinite_count = static_cast<int32_t*>(d_count.get());
        p.tokens = kTokens;
        p.heads = kQHeads;
        p.head_dim = kHeadDim;
        p.block_size = 1;
        p.num_blocks = kTokens;
        p.src_dtype = WIDEATTN_DTYPE_BF16;
        if (!(err = c.status_text(wideattn_quantize_to_cache(ctx, &p, nullptr))).empty()) return err;
        if (!(err = c.sync("flat quantise kernel execution")).empty()) return err;
        std::vector<uint8_t> got(dst_bytes);
        int32_t count = -1;
        if (!(err = d_dst.download(got.data(), got.size())).empty()) return err;
        if (!(err = d_count.download(&count, sizeof count)).empty()) return err;
        c.expect_bytes(got, want, s.label);
        c.expect_count(count, report.nonfinite, s.label);
    }
    return {};
}

// Part 3: compute_scale (and compute_scale_pow2 where `pow2`) on an all-zero, an empty and an
// all-NaN tensor: the floor 2^-126, a power of two itself.
std::string scale_edges(const GpuDevice& gpu, Checker& c, std::mt19937_64& rng, bool pow2) {
    Tensor zeros = random_tensor(rng, kTokens, kKvHeads);
    Tensor nans = zeros;
    for (int32_t t = 0; t < kTokens; ++t)
        for (int32_t h = 0; h < kKvHeads; ++h)
            for (int32_t d = 0; d < kHeadDim; ++d) {
                zeros.at(t, h, d) = float_to_bf16(d % 2 ? -0.0f : 0.0f);
                nans.at(t, h, d) = float_to_bf16(d % 3 ? NAN : (d % 2 ? INFINITY : -INFINITY));
            }
    Tensor empty = zeros;
    empty.tokens = 0;
    DeviceBuffer d_zeros, d_nans, d_scale, d_count;
    std::string err = c.upload(zeros, &d_zeros);
    if (err.empty()) err = c.upload(nans, &d_nans);
    if (err.empty()) err = d_scale.allocate(gpu, sizeof(float));
    if (err.empty()) err = d_count.allocate(gpu, sizeof(int32_t));
    if (!err.empty()) return err;
    const struct {
        const Tensor* tensor;
        const DeviceBuffer* buffer;
        const char* label;
    } cases[] = {{&zeros, &d_zeros, "amax of an all-zero tensor"},
                 {&empty, &d_zeros, "amax of an empty tensor (tokens = 0)"},
                 {&nans, &d_nans, "amax of an all-NaN/inf tensor"}};
    for (const auto& e : cases) {
        fp8::ScaleReport want;
        err = fp8::scale_reference(e.tensor->bits.data(), e.tensor->tokens, kKvHeads, kHeadDim, e.tensor->token_stride,
                                   kHeadDim, nullptr, &want);
        if (!err.empty()) return err;
        float scale = 0.0f;
        int32_t count = -1;
        err = c.compute_scale(scale_params(*e.tensor, *e.buffer, nullptr), d_scale, d_count, &scale, &count);
        if (!err.empty()) return err;
        c.expect_scale(scale, want.scale, e.label);
        c.expect(want.scale == fp8::kE4m3MinScale, std::string(e.label) + ": the reference scale is not the floor");
        c.expect_count(count, want.nonfinite, e.label);
        if (!pow2) continue;
        err = c.compute_scale(scale_params(*e.tensor, *e.buffer, nullptr), d_scale, d_count, &scale, &count, true);
        if (!err.empty()) return err;
        c.expect_scale(scale, want.scale, std::string(e.label) + ", power of two");
        c.expect_count(count, want.nonfinite, std::string(e.label) + ", power of two");
    }
    return {};
}

}  // namespace

ScaleCaseResult run_scale_case(const GpuDevice& gpu, wideattn_context* ctx, uint64_t seed) {
    ScaleCaseResult result;
    std::mt19937_64 rng(seed);
    for (int32_t i = 0; i < wideattn_kernel_count(ctx); ++i) {
        wideattn_kernel_info info{};
        if (wideattn_get_kernel_info(ctx, i, &info) != WIDEATTN_OK || std::string(info.kind) != "amax_e4m3") continue;
        (kernel_has_feature(ctx, info.name, kFeaturePowerOfTwo) ? result.pow2_kernel : result.kernel) = info.name;
    }
    Checker checker(gpu, ctx, &result);
    result.error = amax_then_quantize(gpu, checker, ctx, rng, &result);
    if (result.error.empty()) result.error = flat_q(gpu, checker, ctx, rng, &result);
    if (result.error.empty()) result.error = scale_edges(gpu, checker, rng, !result.pow2_kernel.empty());
    return result;
}

}  // namespace wideattn
