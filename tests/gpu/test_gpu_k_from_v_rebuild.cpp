// test_gpu_k_from_v_rebuild.cpp - wideattn_k_from_v_rebuild on the GPU (the prefill path of K from
// V): every key of a K-from-V call written into a bf16 K + V cache. The keys against the host's
// arithmetic of kernels/common/k_from_v.h bit for bit (bf16(V w), rotated with the caller's cos /
// sin table where it holds the key, else with rope_cos_sin_reduced, the K-from-V decode kernels'
// cos / sin, which gives the device's bits on the host), the V rows bit for bit (bf16 V as stored;
// e4m3 V dequantised: the problems' codes times the scale are bf16 values), every other byte of the
// out caches still poisoned; on varlen batches with key counts no multiple of 16, shuffled pages,
// pages of 16 and 64, one and four KV heads, keys up to position 131071, a caller's inv_freq table
// and a cos / sin table of another theta over part of the keys. Metadata outside the tensors:
// source pages outside the cache give zero rows, out pages outside the out caches are skipped,
// key counts are clamped to both table rows. Then the rebuilt cache under the K + V prefill kernel
// the library picks against the fp64 kernel in K-from-V mode on the same V.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "accuracy/bf16.h"
#include "accuracy/error_stats.h"
#include "fp8/codec/e4m3.h"
#include "kernels/common/k_from_v.h"
#include "tests/gpu/gpu_fixture.h"
#include "tools/harness/checks.h"

using namespace wideattn;
using wideattn::test::gpu;

namespace {

constexpr uint64_t kSeed = 20261204;
constexpr uint16_t kPoisonBf16 = 0xFFFF;  // kPoisonByte twice: a NaN no rebuilt value has

// The K-from-V params of a problem (bf16 out; K from the problem's V codes when spec.e4m3_kv).
wideattn_prefill_params k_from_v_params(const DeviceProblem& dp, const wideattn_k_from_v* kfv) {
    wideattn_prefill_params p = dp.params;
    p.k_cache = nullptr;
    p.k_scale = nullptr;
    p.flags |= WIDEATTN_FLAG_K_FROM_V;
    p.k_from_v = kfv;
    return p;
}

// Runs the rebuild over poisoned out caches and downloads them.
void rebuild(const wideattn_prefill_params& p, RebuildScratch* o, std::vector<uint16_t>* k, std::vector<uint16_t>* v) {
    REQUIRE(o->k.fill(kPoisonByte).empty());
    REQUIRE(o->v.fill(kPoisonByte).empty());
    REQUIRE_MESSAGE(wideattn_k_from_v_rebuild(gpu().ctx, &p, &o->out, nullptr) == WIDEATTN_OK, wideattn_last_error());
    REQUIRE(gpu().device->check(gpu().device->driver().cuCtxSynchronize(), "rebuild (cuCtxSynchronize)").empty());
    k->assign(o->k.bytes() / 2, 0);
    v->assign(o->v.bytes() / 2, 0);
    REQUIRE(o->k.download(k->data(), o->k.bytes()).empty());
    REQUIRE(o->v.download(v->data(), o->v.bytes()).empty());
}

uint16_t bits_of(float bf16_value) { return static_cast<uint16_t>(fp8::float_bits(bf16_value) >> 16); }

// K of one key on the host, as the kernel computes it: kernels/common/k_from_v.h's steps with the
// table's cos / sin where it holds the position, else rope_cos_sin_reduced's.
void host_key(const float* v_row, const wideattn_k_from_v& kfv, int32_t head_dim, int32_t position, float* k_row) {
    const int32_t half = head_dim / 2;
    for (int32_t i = 0; i < half; ++i) {
        RopeCosSin cs{1.0f, 0.0f};
        if (2 * i < kfv.rotary_dims)
            cs = k_from_v_table_holds(kfv, position)
                     ? k_from_v_table_entry(kfv, position, i)
                     : rope_cos_sin_reduced(rope_angle(position, k_from_v_inv_freq(kfv, i, head_dim)));
        const float x_lo = k_from_v_scaled(v_row[i], kfv.k_norm_scale[i]);
        const float x_hi = k_from_v_scaled(v_row[i + half], kfv.k_norm_scale[i + half]);
        k_row[i] = rope_rotate(x_lo, x_hi, cs, true);
        k_row[i + half] = rope_rotate(x_hi, x_lo, cs, false);
    }
}

// Compares the downloaded out caches with the host's rows: keys below each sequence's clamped key
// count (`keys`) hold K and V (zero rows where the source page is outside the cache), out pages
// that `written` marks false and every other slot stay poisoned.
struct Expectation {
    std::vector<int64_t> keys;  // per sequence
    std::vector<bool> written;  // per out block
};

void check_out(const HostProblem& h, const wideattn_k_from_v& host_kfv, const RebuildScratch& o, const Expectation& e,
               const std::vector<uint16_t>& k, const std::vector<uint16_t>& v) {
    const ProblemSpec& s = h.spec;
    const int32_t D = s.head_dim, B = s.block_size, H = s.num_kv_heads;
    std::vector<float> v_row(static_cast<size_t>(D)), k_row(static_cast<size_t>(D));
    std::vector<bool> expected_slot(static_cast<size_t>(o.out.num_blocks) * B, false);
    int64_t k_mismatch = 0, v_mismatch = 0, poison_lost = 0, rows = 0;
    for (size_t seq = 0; seq < s.q_lens.size(); ++seq) {
        for (int64_t j = 0; j < e.keys[seq]; ++j) {
            const size_t page_index = seq * static_cast<size_t>(o.out.block_table_stride) + static_cast<size_t>(j / B);
            const int32_t dst = o.table[page_index];
            if (dst < 0 || dst >= o.out.num_blocks || !e.written[static_cast<size_t>(dst)]) continue;
            expected_slot[static_cast<size_t>(dst) * B + j % B] = true;
            // A source entry outside the cache reads as zeros.
            const int64_t entry = h.block_table[seq * h.table_stride + j / B];
            const bool zero = entry < 0 || entry >= h.num_blocks;
            const int64_t src = zero ? 0 : entry;
            for (int32_t head = 0; head < H; ++head) {
                const int64_t src_row = ((src * B + j % B) * H + head) * D;
                const int64_t dst_row = ((int64_t{dst} * B + j % B) * H + head) * D;
                for (int32_t d = 0; d < D; ++d) v_row[d] = zero ? 0.0f : bf16_to_float(h.v[src_row + d]);
                host_key(v_row.data(), host_kfv, D, static_cast<int32_t>(j), k_row.data());
                for (int32_t d = 0; d < D; ++d) {
                    k_mismatch += k[dst_row + d] != bits_of(k_row[d]);
                    v_mismatch += v[dst_row + d] != bits_of(v_row[d]);
                }
                ++rows;
            }
        }
    }
    for (int64_t block = 0; block < o.out.num_blocks; ++block)
        for (int32_t slot = 0; slot < B; ++slot) {
            if (expected_slot[static_cast<size_t>(block * B + slot)]) continue;
            const int64_t first = (block * B + slot) * H * D;
            for (int64_t i = first; i < first + int64_t{H} * D; ++i)
                poison_lost += (k[i] != kPoisonBf16) + (v[i] != kPoisonBf16);
        }
    std::printf("  rebuild  %-70s %lld rows, K %lld / V %lld elements differ, %lld unwritten elements touched\n",
                s.describe().c_str(), static_cast<long long>(rows), static_cast<long long>(k_mismatch),
                static_cast<long long>(v_mismatch), static_cast<long long>(poison_lost));
    CHECK(rows > 0);
    CHECK(k_mismatch == 0);
    CHECK(v_mismatch == 0);
    CHECK(poison_lost == 0);
}

// The description's tables for one case: the k_norm weights (device and host), and optionally a
// frequency table and a cos / sin table (uploaded; the host description reads the same values).
struct Description {
    std::vector<float> w, inv_freq;
    std::vector<uint32_t> cos_sin;
    DeviceBuffer w_dev, inv_freq_dev, cos_sin_dev;
    wideattn_k_from_v device{}, host{};

    void create(const ProblemSpec& spec, int32_t rotary_dims, bool with_inv_freq, int32_t table_positions) {
        w = random_k_norm_weights(spec.head_dim, spec.seed + 1);
        REQUIRE(w_dev.allocate(*gpu().device, w.size() * sizeof(float)).empty());
        REQUIRE(w_dev.upload(w.data(), w.size() * sizeof(float)).empty());
        device = k_from_v_check_description(static_cast<const float*>(w_dev.get()), rotary_dims);
        host = k_from_v_check_description(w.data(), rotary_dims);
        if (with_inv_freq) {
            inv_freq = formula_inv_freq(host, spec.head_dim);
            inv_freq[1] = std::nextafter(inv_freq[1], 1.0f);  // not the formula's: the table is read
            REQUIRE(inv_freq_dev.allocate(*gpu().device, inv_freq.size() * sizeof(float)).empty());
            REQUIRE(inv_freq_dev.upload(inv_freq.data(), inv_freq.size() * sizeof(float)).empty());
            device.inv_freq = static_cast<const float*>(inv_freq_dev.get());
            host.inv_freq = inv_freq.data();
        }
        if (table_positions > 0) {
            wideattn_k_from_v other = host;
            other.inv_freq = nullptr;
            other.rope_theta = 1.0e4f;  // far from the description's: the table's keys differ
            REQUIRE(k_from_v_cos_sin_table(other, spec.head_dim, table_positions, &cos_sin).empty());
            REQUIRE(attach_host_cos_sin(cos_sin, &host).empty());
            REQUIRE(attach_device_cos_sin(*gpu().device, cos_sin, &cos_sin_dev, &device).empty());
        }
    }
};

void check_rebuild_spec(ProblemSpec spec, bool e4m3, int32_t rotary_dims, bool with_inv_freq = false,
                        int32_t table_positions = 0) {
    spec.e4m3_kv = e4m3;
    CAPTURE(spec.describe());
    CAPTURE(rotary_dims);
    CAPTURE(with_inv_freq);
    CAPTURE(table_positions);
    HostProblem h;
    REQUIRE(make_problem(spec, &h).empty());
    DeviceProblem dp;
    REQUIRE(dp.create(*gpu().device, h, WIDEATTN_DTYPE_BF16).empty());
    Description desc;
    desc.create(spec, rotary_dims, with_inv_freq, table_positions);
    RebuildScratch o;
    REQUIRE(o.create(*gpu().device, h, h.table_stride).empty());
    std::vector<uint16_t> k, v;
    rebuild(k_from_v_params(dp, &desc.device), &o, &k, &v);
    Expectation e;
    for (int32_t len : h.seq_lens_k) e.keys.push_back(len);
    e.written.assign(static_cast<size_t>(o.out.num_blocks), true);
    check_out(h, desc.host, o, e, k, v);
}

}  // namespace

TEST_CASE("gpu K-from-V rebuild: K and V bit for bit, nothing else written (bf16 and e4m3 V)") {
    for (const bool e4m3 : {false, true}) {
        CAPTURE(e4m3);
        check_rebuild_spec(problem_spec({1, 7, 0, 63, 5}, {0, 777, 5, 1, 4000}, 32, 4, 16, kSeed), e4m3,
                           kGemma4GlobalRotaryDims);
        check_rebuild_spec(problem_spec({300, 1}, {1000, 33}, 8, 1, 64, kSeed + 1), e4m3, kGemma4GlobalRotaryDims);
        check_rebuild_spec(problem_spec({2}, {131069}, 8, 1, 64, kSeed + 2), e4m3, 512);  // every dim rotates
        check_rebuild_spec(problem_spec({9, 40}, {3000, 17}, 32, 4, 16, kSeed + 3), e4m3, kGemma4GlobalRotaryDims,
                           true);
        check_rebuild_spec(problem_spec({9, 40}, {3000, 17}, 32, 4, 16, kSeed + 4), e4m3, kGemma4GlobalRotaryDims,
                           false, 1500);  // a cos / sin table over part of the keys
    }
}

TEST_CASE("gpu K-from-V rebuild: metadata outside the tensors") {
    for (const bool e4m3 : {false, true}) {
        CAPTURE(e4m3);
        ProblemSpec spec = problem_spec({1, 1, 1, 20}, {700, 40, 3000, 100}, 32, 4, 16, kSeed + 5);
        spec.e4m3_kv = e4m3;
        HostProblem h;
        REQUIRE(make_problem(spec, &h).empty());
        Expectation e;
        // Source entries outside the cache (negative, num_blocks, INT32_MAX): zero rows.
        const int32_t outside[] = {-1, h.num_blocks, INT32_MAX};
        for (size_t i = 0; i < 3; ++i) h.block_table[i * h.table_stride + 2 + i] = outside[i];
        // Key counts past the row (clamped to table_stride x block_size) and below zero (none).
        h.seq_lens_k[1] = INT32_MAX;
        h.seq_lens_k[3] = -5;
        DeviceProblem dp;
        REQUIRE(dp.create(*gpu().device, h, WIDEATTN_DTYPE_BF16).empty());
        Description desc;
        desc.create(spec, kGemma4GlobalRotaryDims, false, 0);
        RebuildScratch o;
        REQUIRE(o.create(*gpu().device, h, h.table_stride).empty());
        // Out entries outside the out caches: their keys are skipped.
        o.table[static_cast<size_t>(2 * o.out.block_table_stride + 1)] = -7;
        o.table[static_cast<size_t>(2 * o.out.block_table_stride + 4)] = o.out.num_blocks;
        REQUIRE(o.upload_table().empty());
        e.written.assign(static_cast<size_t>(o.out.num_blocks), true);
        e.written[static_cast<size_t>(2 * o.out.block_table_stride + 1)] = false;
        e.written[static_cast<size_t>(2 * o.out.block_table_stride + 4)] = false;
        for (size_t s = 0; s < h.seq_lens_k.size(); ++s)
            e.keys.push_back(std::clamp<int64_t>(h.seq_lens_k[s], 0, int64_t{h.table_stride} * spec.block_size));
        std::vector<uint16_t> k, v;
        rebuild(k_from_v_params(dp, &desc.device), &o, &k, &v);
        check_out(h, desc.host, o, e, k, v);

        // A narrower out table clamps the keys to its row.
        RebuildScratch narrow;
        REQUIRE(narrow.create(*gpu().device, h, 3).empty());
        rebuild(k_from_v_params(dp, &desc.device), &narrow, &k, &v);
        Expectation en = e;
        for (int64_t& keys : en.keys) keys = std::min<int64_t>(keys, 3 * spec.block_size);
        en.written.assign(static_cast<size_t>(narrow.out.num_blocks), true);
        check_out(h, desc.host, narrow, en, k, v);
    }
}

TEST_CASE("gpu K-from-V rebuild then the K + V prefill kernel: against the fp64 kernel in K-from-V mode") {
    for (const bool e4m3 : {false, true}) {
        for (const ProblemSpec& base :
             {problem_spec({1, 7, 0, 63, 5}, {0, 777, 5, 1, 4000}, 32, 4, 16, kSeed + 6),
              problem_spec({1000}, {3000}, 32, 4, 64, kSeed + 7),
              problem_spec({300, 129}, {0, 20000}, 8, 1, 16, kSeed + 8)}) {
            ProblemSpec spec = base;
            spec.e4m3_kv = e4m3;
            spec.gemma.q_rms = 0.5f;  // QK-normed Gemma-like inputs
            CAPTURE(spec.describe());
            HostProblem h;
            REQUIRE(make_problem(spec, &h).empty());
            Description desc;
            desc.create(spec, kGemma4GlobalRotaryDims, false, 0);

            // The fp64 kernel in K-from-V mode on the (exactly dequantised) bf16 V.
            DeviceProblem ref;
            REQUIRE(ref.create(*gpu().device, h, WIDEATTN_DTYPE_F64).empty());
            wideattn_prefill_params ref_params = k_from_v_params(ref, &desc.device);
            ref.params = ref_params;
            REQUIRE_MESSAGE(ref.run(*gpu().device, gpu().ctx).empty(), "fp64 K-from-V");
            std::vector<double> want;
            REQUIRE(ref.download_output(h, &want).empty());

            // Rebuild, then the K + V call on the out caches.
            DeviceProblem dp;
            REQUIRE(dp.create(*gpu().device, h, WIDEATTN_DTYPE_BF16).empty());
            RebuildScratch o;
            REQUIRE(o.create(*gpu().device, h, h.table_stride).empty());
            std::vector<uint16_t> k, v;
            const wideattn_prefill_params from_v = k_from_v_params(dp, &desc.device);
            rebuild(from_v, &o, &k, &v);
            const wideattn_prefill_params kv = k_and_v_call(from_v, o.out);
            wideattn_launch_plan plan{};
            REQUIRE(wideattn_plan_launch(gpu().ctx, &kv, gpu().device->cc_major(), gpu().device->cc_minor(),
                                         gpu().device->multiprocessors(), &plan) == WIDEATTN_OK);
            wideattn_kernel_info info{};
            REQUIRE(wideattn_get_kernel_info(gpu().ctx, plan.kernel_index, &info) == WIDEATTN_OK);
            dp.params = kv;
            REQUIRE_MESSAGE(dp.run(*gpu().device, gpu().ctx).empty(), "K + V prefill on the rebuilt cache");
            std::vector<double> got;
            REQUIRE(dp.download_output(h, &got).empty());
            const accuracy::ErrorStats stats = accuracy::compute_error_stats(
                want.data(), got.data(), accuracy::OutputType::kF64, static_cast<int64_t>(got.size()));
            std::printf("  rebuild + %-16s %-60s %s\n", info.name, spec.describe().c_str(),
                        accuracy::format_error_stats(stats).c_str());
            INFO(accuracy::format_error_stats(stats));
            CHECK(stats.nonfinite == 0);
            CHECK(stats.rel_l2 <= kBf16RelL2);
        }
    }
}
