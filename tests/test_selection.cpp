// test_selection.cpp - which kernel for which arch and shape, clear refusals, launch geometry, and
// the cache layouts TMA kernels accept.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>

#include "dispatch/kv_tensor_maps.h"
#include "dispatch/manifest.h"
#include "dispatch/selection.h"
#include "dispatch/split_plan.h"
#include "kernels/common/k_from_v.h"
#include "kernels/common/kernel_desc.h"
#include "tests/test_helpers.h"

using namespace wideattn;

namespace {

// Head dims the synthetic quantise and amax kernels serve: 8..4096 in steps of 8.
constexpr int kAuxHeadMin = 8;
constexpr int kAuxHeadMax = 4096;
constexpr int kAuxHeadStep = 8;
constexpr int kCubinBytes = 4;
constexpr const char* kZeroHash = "0000000000000000";

// The manifest of these kernel entries, REQUIREd to parse.
Manifest parse_bundle(const std::vector<std::string>& kernels) {
    Manifest m;
    std::string err;
    const bool ok = parse_manifest(test::manifest_json(kernels), &m, &err);
    REQUIRE_MESSAGE(ok, err);
    return m;
}

// A quantise or amax kernel entry: its kind is its name, group 1, head dims kAuxHead*.
std::string aux_kernel_json(const std::string& kind, const std::string& arch, const std::string& o_dtype,
                            const std::string& features) {
    return test::kernel_json(kind, arch, o_dtype, kAuxHeadMin, kAuxHeadMax, kAuxHeadStep, 1, 1, features, kCubinBytes,
                             kZeroHash, kind);
}

// A quantise (`select` = select_quantize_kernel) or amax (select_scale_kernel) choice on a
// bundle with `kind` for sm_80 and sm_90a: the sm_90a cubin of that kind on 9.0, the sm_80
// one on 8.6, a refusal on 7.5. Returns the refusal's message for the caller to check.
template <typename Params, typename Select>
std::string check_aux_arch_choice(const Manifest& m, const Params& p, Select select, const std::string& kind) {
    int32_t index = -1;
    std::string why;
    REQUIRE(select(m.kernels, p, 9, 0, &index, &why) == WIDEATTN_OK);
    CHECK(m.kernels[index].kind == kind);
    CHECK(m.kernels[index].arch == "sm_90a");
    REQUIRE(select(m.kernels, p, 8, 6, &index, &why) == WIDEATTN_OK);
    CHECK(m.kernels[index].arch == "sm_80");
    CHECK(select(m.kernels, p, 7, 5, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    return why;
}

Manifest synthetic_bundle() {
    return parse_bundle({
        test::kernel_json("mma_bf16_d512", "sm_90a", "bf16", 512, 512, 512, 8, 8),
        test::kernel_json("mma_bf16_d512", "sm_120a", "bf16", 512, 512, 512, 8, 8),
        test::kernel_json("mma_bf16_d512", "sm_80", "bf16", 512, 512, 512, 8, 8),
        test::kernel_json("mma_bf16_d512", "sm_86", "bf16", 512, 512, 512, 8, 8),
        test::kernel_json("reference_f64", "sm_80", "f64", 32, 512, 32, 1, 65536),
        test::kernel_json("reference_f64", "sm_90a", "f64", 32, 512, 32, 1, 65536),
        test::kernel_json("nolse_bf16", "sm_90a", "bf16", 256, 256, 256, 8, 8, "\"varlen\""),
    });
}

std::string select_name(const Manifest& m, const wideattn_prefill_params& p, int major, int minor, std::string* why) {
    int32_t index = -1;
    if (select_kernel(m.kernels, p, major, minor, &index, why) != WIDEATTN_OK) return "";
    return m.kernels[index].name + "@" + m.kernels[index].arch;
}

}  // namespace

TEST_CASE("selection: arch compatibility of cubins") {
    ManifestKernel k;
    k.arch_major = 9;
    k.arch_minor = 0;
    k.arch_specific = true;
    CHECK(arch_runs_on(k, 9, 0));
    CHECK_FALSE(arch_runs_on(k, 10, 0));
    CHECK_FALSE(arch_runs_on(k, 8, 9));
    k.arch_major = 8;
    k.arch_specific = false;
    CHECK(arch_runs_on(k, 8, 0));
    CHECK(arch_runs_on(k, 8, 6));
    CHECK(arch_runs_on(k, 8, 9));
    CHECK_FALSE(arch_runs_on(k, 9, 0));  // SASS does not carry across major versions
    k.arch_minor = 6;
    CHECK_FALSE(arch_runs_on(k, 8, 0));
    k.arch_major = 12;
    k.arch_minor = 0;
    k.arch_specific = true;
    CHECK(arch_runs_on(k, 12, 0));
    CHECK_FALSE(arch_runs_on(k, 12, 1));
}

TEST_CASE("selection: picks the kernel and the closest cubin for the device") {
    const Manifest m = synthetic_bundle();
    wideattn_prefill_params p = test::valid_params();
    std::string why;
    CHECK(select_name(m, p, 9, 0, &why) == "mma_bf16_d512@sm_90a");
    CHECK(select_name(m, p, 12, 0, &why) == "mma_bf16_d512@sm_120a");
    CHECK(select_name(m, p, 8, 0, &why) == "mma_bf16_d512@sm_80");
    CHECK(select_name(m, p, 8, 6, &why) == "mma_bf16_d512@sm_86");
    CHECK(select_name(m, p, 8, 9, &why) == "mma_bf16_d512@sm_86");
    p.o_dtype = WIDEATTN_DTYPE_F64;
    CHECK(select_name(m, p, 9, 0, &why) == "reference_f64@sm_90a");
    CHECK(select_name(m, p, 8, 9, &why) == "reference_f64@sm_80");
    p.num_q_heads = 12;
    p.num_kv_heads = 12;  // group 1: only the reference serves it
    CHECK(select_name(m, p, 9, 0, &why) == "reference_f64@sm_90a");
}

TEST_CASE("selection: the kernel of highest priority wins, whatever the manifest order") {
    // A kernel entry that serves the valid params, of priority `priority`.
    auto entry = [](const std::string& name, const std::string& arch, int priority) {
        return test::kernel_json(name, arch, "bf16", 512, 512, 512, 8, 8, "\"varlen\", \"paged\", \"lse\"",
                                 kCubinBytes, kZeroHash, "prefill", priority);
    };
    const wideattn_prefill_params p = test::valid_params();
    std::string why;
    // Both kernels run on 9.0: the higher priority wins in either order; on 8.6 only the lower one
    // has a cubin that runs.
    const Manifest low_first =
        parse_bundle({entry("low", "sm_90", 10), entry("low", "sm_80", 10), entry("high", "sm_90a", 20)});
    const Manifest high_first =
        parse_bundle({entry("high", "sm_90a", 20), entry("low", "sm_80", 10), entry("low", "sm_90", 10)});
    CHECK(select_name(low_first, p, 9, 0, &why) == "high@sm_90a");
    CHECK(select_name(high_first, p, 9, 0, &why) == "high@sm_90a");
    CHECK(select_name(low_first, p, 8, 6, &why) == "low@sm_80");
    // A closer cubin of a lower-priority kernel does not displace the chosen kernel's cubin.
    const Manifest mixed = parse_bundle({entry("high", "sm_80", 20), entry("low", "sm_90a", 10),
                                         entry("high", "sm_90a", 20), entry("low", "sm_86", 10)});
    CHECK(select_name(mixed, p, 9, 0, &why) == "high@sm_90a");
    CHECK(select_name(mixed, p, 8, 9, &why) == "high@sm_80");
    // Equal priorities: the smaller name, in either order.
    CHECK(select_name(parse_bundle({entry("b", "sm_80", 5), entry("a", "sm_80", 5)}), p, 8, 6, &why) == "a@sm_80");
    CHECK(select_name(parse_bundle({entry("a", "sm_80", 5), entry("b", "sm_80", 5)}), p, 8, 6, &why) == "a@sm_80");
}

TEST_CASE("selection: a kernel's priority is that of its cubin closest to the device (per-arch priority)") {
    auto entry = [](const std::string& name, const std::string& arch, int priority) {
        return test::kernel_json(name, arch, "bf16", 512, 512, 512, 8, 8, "\"varlen\", \"paged\", \"lse\"",
                                 kCubinBytes, kZeroHash, "prefill", priority);
    };
    const wideattn_prefill_params p = test::valid_params();
    std::string why;
    // The ping-pong pair of the bundle: "plain" first everywhere but on sm_120a, where "pp" has the
    // higher priority; both are built for sm_80, sm_89 and sm_120a.
    const std::vector<std::string> pair = {entry("plain", "sm_80", 210), entry("pp", "sm_80", 205),
                                           entry("plain", "sm_89", 210), entry("pp", "sm_89", 205),
                                           entry("plain", "sm_120a", 210), entry("pp", "sm_120a", 215)};
    for (const bool reversed : {false, true}) {
        std::vector<std::string> entries = pair;
        if (reversed) std::reverse(entries.begin(), entries.end());
        const Manifest m = parse_bundle(entries);
        CAPTURE(reversed);
        CHECK(select_name(m, p, 12, 0, &why) == "pp@sm_120a");
        CHECK(select_name(m, p, 8, 9, &why) == "plain@sm_89");
        CHECK(select_name(m, p, 8, 6, &why) == "plain@sm_80");
    }
    // The closest cubin decides even when a farther cubin of the same kernel ranks higher: "a" is
    // 30 on sm_80 but 10 on sm_86, so on 8.6 "b" (20) wins in any order of the entries.
    const std::vector<std::string> split = {entry("a", "sm_80", 30), entry("b", "sm_86", 20), entry("a", "sm_86", 10)};
    CHECK(select_name(parse_bundle(split), p, 8, 6, &why) == "b@sm_86");
    CHECK(select_name(parse_bundle({split[2], split[1], split[0]}), p, 8, 6, &why) == "b@sm_86");
    CHECK(select_name(parse_bundle(split), p, 8, 0, &why) == "a@sm_80");
}

TEST_CASE("selection: the built bundle's mma-tier BF16 kernel per arch (ping-pong first on sm_120a only)") {
    Manifest m;
    std::string err;
    REQUIRE_MESSAGE(load_manifest(test::built_bundle(), &m, &err), err);
    wideattn_prefill_params p = test::valid_params();
    p.max_seqlen_q = 50;  // two sequences of 50 query tokens: the two-CTA kernel's calls (many_tokens)
    struct ArchCase {
        const char* arch;
        int major, minor;
        const char* expected;
    };
    // sm_90a builds carry the Hopper tier, which outranks both mma-tier kernels there; its first
    // BF16 kernel is the two-CTA one, then the one-CTA block.
    const ArchCase cases[] = {{"sm_120a", 12, 0, "mma_bf16_d512_pp@sm_120a"},
                              {"sm_89", 8, 9, "mma_bf16_d512@sm_89"},
                              {"sm_90a", 9, 0, "wgmma_bf16c2p_d512@sm_90a"},
                              {"sm_86", 8, 6, "mma_bf16_d512@sm_86"},
                              {"sm_80", 8, 0, "mma_bf16_d512@sm_80"}};
    int checked = 0;
    for (const ArchCase& c : cases) {
        const bool built = std::any_of(m.kernels.begin(), m.kernels.end(),
                                       [&](const ManifestKernel& k) { return k.arch == c.arch; });
        if (!built) continue;
        CAPTURE(c.arch);
        CHECK(select_name(m, p, c.major, c.minor, &err) == c.expected);
        // Without the Hopper tier, the mma tier's order still holds on sm_90a.
        int32_t index = -1;
        if (std::string(c.arch) == "sm_90a") {
            REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &err, "wgmma_bf16_d512") == WIDEATTN_OK);
            CHECK(m.kernels[index].name == "wgmma_bf16_d512");
            REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &err, "mma_bf16_d512") == WIDEATTN_OK);
            CHECK(m.kernels[index].name == "mma_bf16_d512");
            REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &err, "mma_bf16_d512_pp") == WIDEATTN_OK);
            CHECK(m.kernels[index].name == "mma_bf16_d512_pp");
        }
        ++checked;
    }
    CHECK(checked > 0);
}

TEST_CASE("selection: refusals say what is missing") {
    const Manifest m = synthetic_bundle();
    std::string why;
    wideattn_prefill_params p = test::valid_params();

    SUBCASE("no cubin for the device's arch") {
        CHECK(select_name(m, p, 7, 5, &why).empty());
        CHECK(why.find("on sm_75") != std::string::npos);
        CHECK(why.find("does not run on sm_75") != std::string::npos);
        CHECK(select_name(m, p, 10, 0, &why).empty());
        CHECK(why.find("sm_100") != std::string::npos);
    }
    SUBCASE("head dim") {
        p.head_dim = 384;
        CHECK(select_name(m, p, 9, 0, &why).empty());
        CHECK(why.find("head_dim=384") != std::string::npos);
        CHECK(why.find("serves head_dim 512..512") != std::string::npos);
    }
    SUBCASE("group") {
        p.num_q_heads = 16;  // group 4
        CHECK(select_name(m, p, 9, 0, &why).empty());
        CHECK(why.find("group=4") != std::string::npos);
        CHECK(why.find("serves group 8..8") != std::string::npos);
    }
    SUBCASE("dtypes") {
        p.o_dtype = WIDEATTN_DTYPE_F32;
        CHECK(select_name(m, p, 9, 0, &why).empty());
        CHECK(why.find("o_dtype=f32") != std::string::npos);
        CHECK(why.find("no kernel has these dtypes") != std::string::npos);
    }
    SUBCASE("grid.y limit") {
        p.o_dtype = WIDEATTN_DTYPE_F64;
        p.num_q_heads = 70000;
        p.num_kv_heads = 70000;  // group 1: one head per block
        CHECK(select_name(m, p, 9, 0, &why).empty());
        CHECK(why.find("70000 blocks in grid.y") != std::string::npos);
        p.num_q_heads = p.num_kv_heads = 65535;
        CHECK(select_name(m, p, 9, 0, &why) == "reference_f64@sm_90a");
    }
    SUBCASE("lse needs the feature") {
        p.head_dim = 256;
        p.lse = reinterpret_cast<void*>(0x60000000);
        p.lse_head_stride = p.total_q;
        CHECK(select_name(m, p, 9, 0, &why).empty());
        CHECK(why.find("with lse") != std::string::npos);
        CHECK(why.find("nolse_bf16 cannot write lse") != std::string::npos);
        p.lse = nullptr;
        CHECK(select_name(m, p, 9, 0, &why) == "nolse_bf16@sm_90a");
    }
}

TEST_CASE("selection: launch geometry covers every token tile") {
    const Manifest m = synthetic_bundle();
    wideattn_prefill_params p = test::valid_params();
    p.num_seqs = 3;
    p.total_q = 17;
    const LaunchGeometry g = launch_geometry(m.kernels[0], p);
    CHECK(g.grid_x == 5);  // ceil((17 + 3 * (8 - 1)) / 8): an upper bound on sum ceil(q_len / 8)
    CHECK(g.grid_y == 4);  // 32 heads / 8 per block
    CHECK(g.block_x == 256);
    CHECK(g.dynamic_smem == 98304);
    // Exhaustive check of the bound against every split of small batches into one, two and three
    // sequences: never below the tiles a split needs (no tile left without a block), and at most
    // one row above the most any split needs once every sequence can hold a token.
    const auto tiles = [](int q, int tile) { return (q + tile - 1) / tile; };
    for (int tile = 1; tile <= 16; ++tile)
        for (int total = 0; total <= 24; ++total) {
            int64_t most[4] = {0, tiles(total, tile), 0, 0};
            for (int a = 0; a <= total; ++a) {
                most[2] = std::max<int64_t>(most[2], tiles(a, tile) + tiles(total - a, tile));
                for (int b = 0; a + b <= total; ++b)
                    most[3] = std::max<int64_t>(most[3], tiles(a, tile) + tiles(b, tile) + tiles(total - a - b, tile));
            }
            for (int seqs = 1; seqs <= 3; ++seqs) {
                CHECK(token_tile_count(total, seqs, tile) >= most[seqs]);
                if (total >= seqs) CHECK(token_tile_count(total, seqs, tile) <= most[seqs] + 1);
            }
        }
    CHECK(token_tile_count(5, 1, 8) == 2);  // the verify step's row of empty blocks, kept
    CHECK(token_tile_count(100, 5, 1) == 100);
    CHECK(heads_per_block(8, 8) == 8);
    CHECK(heads_per_block(12, 8) == 6);
    CHECK(heads_per_block(7, 8) == 7);
    CHECK(heads_per_block(11, 8) == 1);
    CHECK(heads_per_block(16, 8) == 8);
}

TEST_CASE("selection: a cta_pair kernel gets kCtaPairSize CTAs per token tile along grid.x, and split planning counts them") {
    std::string pair = test::kernel_json("pair_bf16", "sm_90a", "bf16", 512, 512, 512, 8, 8,
                                         "\"varlen\", \"paged\", \"lse\", \"cta_pair\"");
    const auto set = [&pair](const std::string& from, const std::string& to) {
        pair.replace(pair.find(from), from.size(), to);
    };
    set("\"min_sm\": 80", "\"min_sm\": 90");
    set("\"tokens\": 8", "\"tokens\": 16");
    const Manifest m = parse_bundle({pair, test::kernel_json("mma_bf16_d512", "sm_90a", "bf16", 512, 512, 512, 8, 8)});
    REQUIRE(m.kernels[0].has_feature(kFeatureCtaPair));
    wideattn_prefill_params p = test::valid_params();
    for (const int32_t num_seqs : {1, 3, 7})
        for (const int32_t total_q : {1, 16, 17, 100, 4096}) {
            if (total_q < num_seqs) continue;
            p.num_seqs = num_seqs;
            p.total_q = total_q;
            CAPTURE(num_seqs);
            CAPTURE(total_q);
            const LaunchGeometry pair_grid = launch_geometry(m.kernels[0], p);
            CHECK(pair_grid.grid_x == kCtaPairSize * token_tile_count(total_q, num_seqs, 16));
            CHECK(pair_grid.grid_x % kCtaPairSize == 0);
            CHECK(pair_grid.grid_y == launch_geometry(m.kernels[1], p).grid_y);
            CHECK(launch_geometry(m.kernels[1], p).grid_x == token_tile_count(total_q, num_seqs, 8));
            // The split heuristics count the CTAs the grid has.
            CHECK(working_blocks(m.kernels[0], p) == int64_t{pair_grid.grid_x} * pair_grid.grid_y);
        }
}

TEST_CASE("selection: quantise kernels are chosen by kind, dtype, head dim and arch") {
    const Manifest m = parse_bundle({
        test::kernel_json("mma_bf16_d512", "sm_90a", "bf16", 512, 512, 512, 8, 8),
        aux_kernel_json("quantize_e4m3", "sm_80", "e4m3", "\"paged\""),
        aux_kernel_json("quantize_e4m3", "sm_90a", "e4m3", "\"paged\""),
    });
    wideattn_quantize_params p = test::valid_quantize_params();
    CHECK(check_aux_arch_choice(m, p, select_quantize_kernel, "quantize_e4m3").find("does not run on sm_75") !=
          std::string::npos);
    int32_t index = -1;
    std::string why;
    p.head_dim = 8192;
    CHECK(select_quantize_kernel(m.kernels, p, 9, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why.find("not head_dim=8192") != std::string::npos);
    // A prefill call never picks the quantise kernel, and vice versa.
    wideattn_prefill_params prefill = test::valid_params();
    REQUIRE(select_kernel(m.kernels, prefill, 9, 0, &index, &why) == WIDEATTN_OK);
    CHECK(m.kernels[index].kind == "prefill");

    p = test::valid_quantize_params();
    const LaunchGeometry g = quantize_launch_geometry(m.kernels[1], p);
    CHECK(g.grid_x == 10);                        // one row of blocks per token
    CHECK(g.grid_y == 1);  // 4 heads x 512 dims = 2048 elements <= 256 threads x tile.keys 32 elements
    CHECK(g.block_x == 256);
    p.heads = 33;  // 16896 elements: 3 blocks of 8192
    CHECK(quantize_launch_geometry(m.kernels[1], p).grid_y == 3);
}

// A power-of-two amax kernel (feature power_of_two) named `name`, of kind amax_e4m3.
std::string pow2_amax_json(const std::string& name, const std::string& arch) {
    return test::kernel_json(name, arch, "f32", kAuxHeadMin, kAuxHeadMax, kAuxHeadStep, 1, 1,
                             "\"slot_mapping\", \"power_of_two\"", kCubinBytes, kZeroHash, "amax_e4m3");
}

TEST_CASE("selection: wideattn_compute_scale_pow2 takes the power_of_two amax kernels, compute_scale the others") {
    const Manifest both = parse_bundle({
        pow2_amax_json("amax_e4m3_pow2", "sm_80"),
        aux_kernel_json("amax_e4m3", "sm_80", "f32", "\"slot_mapping\""),
        pow2_amax_json("amax_e4m3_pow2", "sm_90a"),
        aux_kernel_json("amax_e4m3", "sm_90a", "f32", "\"slot_mapping\""),
    });
    const wideattn_scale_params p = test::valid_scale_params();
    int32_t index = -1;
    std::string why;
    struct Device {
        int32_t major, minor;
        const char* arch;  // of the cubin that serves it
    };
    for (const Device& d : {Device{9, 0, "sm_90a"}, Device{8, 6, "sm_80"}}) {
        const int32_t major = d.major, minor = d.minor;
        const std::string arch = d.arch;
        CAPTURE(arch);
        REQUIRE(select_scale_kernel(both.kernels, p, major, minor, &index, &why) == WIDEATTN_OK);
        CHECK(both.kernels[index].name == "amax_e4m3");
        CHECK(both.kernels[index].arch == arch);
        REQUIRE(select_scale_pow2_kernel(both.kernels, p, major, minor, &index, &why) == WIDEATTN_OK);
        CHECK(both.kernels[index].name == "amax_e4m3_pow2");
        CHECK(both.kernels[index].arch == arch);
    }
    // Each call passes over the other's kernels in silence: its refusal names its own.
    CHECK(select_scale_pow2_kernel(both.kernels, p, 7, 5, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why == "no power-of-two e4m3 amax kernel in the bundle for sm_75: amax_e4m3_pow2 (sm_80) does not run on "
                 "sm_75");
    const Manifest plain = parse_bundle({aux_kernel_json("amax_e4m3", "sm_90a", "f32", "\"slot_mapping\"")});
    CHECK(select_scale_pow2_kernel(plain.kernels, p, 9, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why == "no power-of-two e4m3 amax kernel in the bundle for sm_90: the bundle has none");
    const Manifest only_pow2 = parse_bundle({pow2_amax_json("amax_e4m3_pow2", "sm_90a")});
    CHECK(select_scale_kernel(only_pow2.kernels, p, 9, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why == "no e4m3 amax kernel in the bundle for sm_90: the bundle has none");
    CHECK(select_scale_pow2_kernel(only_pow2.kernels, p, 9, 0, &index, &why) == WIDEATTN_OK);
}

TEST_CASE("selection: amax kernels are chosen by kind, dtype, head dim, grid and arch") {
    const Manifest m = parse_bundle({
        test::kernel_json("mma_bf16_d512", "sm_90a", "bf16", 512, 512, 512, 8, 8),
        aux_kernel_json("quantize_e4m3", "sm_90a", "e4m3", "\"paged\""),
        aux_kernel_json("amax_e4m3", "sm_80", "f32", "\"slot_mapping\""),
        aux_kernel_json("amax_e4m3", "sm_90a", "f32", "\"slot_mapping\""),
    });
    wideattn_scale_params p = test::valid_scale_params();
    CHECK(check_aux_arch_choice(m, p, select_scale_kernel, "amax_e4m3") ==
          "no e4m3 amax kernel in the bundle for sm_75: amax_e4m3 (sm_80) does not run on sm_75");
    int32_t index = -1;
    std::string why;
    p.head_dim = 8200;
    CHECK(select_scale_kernel(m.kernels, p, 9, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why.find("not head_dim=8200") != std::string::npos);
    p = test::valid_scale_params();
    p.heads = 65535 * 16 + 1;  // 512 dims each, 8192-element blocks: 65536 blocks in grid.y
    CHECK(select_scale_kernel(m.kernels, p, 9, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why.find("would need 65536 blocks in grid.y for heads=1048561 x head_dim=512 (limit 65535)") !=
          std::string::npos);
    p.heads = 65535 * 16;
    CHECK(select_scale_kernel(m.kernels, p, 9, 0, &index, &why) == WIDEATTN_OK);
    // The grid limit needs no device: checked for every arch's kernel before the driver loads.
    CHECK(check_scale_grid(m.kernels, p, &why) == WIDEATTN_OK);
    p.heads = 65535 * 16 + 1;
    CHECK(check_scale_grid(m.kernels, p, &why) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(why == "heads=1048561 x head_dim=512 needs 65536 blocks in grid.y of amax_e4m3 (8192 elements per block, "
                 "limit 65535): at most 1048560 heads of head_dim=512");
    p.head_dim = 8200;  // served by no kernel: left to the selection (UNSUPPORTED)
    CHECK(check_scale_grid(m.kernels, p, &why) == WIDEATTN_OK);
    p = test::valid_scale_params();
    // The quantise selection has the same grid limit.
    wideattn_quantize_params q = test::valid_quantize_params();
    q.heads = 65535 * 16 + 1;
    CHECK(select_quantize_kernel(m.kernels, q, 9, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why.find("limit 65535") != std::string::npos);
    CHECK(check_quantize_grid(m.kernels, q, &why) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(why.find("heads=1048561 x head_dim=512 needs 65536 blocks in grid.y of quantize_e4m3") == 0);
    q.heads = 65535 * 16;
    CHECK(check_quantize_grid(m.kernels, q, &why) == WIDEATTN_OK);
    // Neither picks the other's kernel, and a bundle without an amax kernel says so.
    q = test::valid_quantize_params();
    REQUIRE(select_quantize_kernel(m.kernels, q, 9, 0, &index, &why) == WIDEATTN_OK);
    CHECK(m.kernels[index].kind == "quantize_e4m3");
    const Manifest no_amax = parse_bundle({aux_kernel_json("quantize_e4m3", "sm_90a", "e4m3", "\"paged\"")});
    p = test::valid_scale_params();
    CHECK(select_scale_kernel(no_amax.kernels, p, 9, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why == "no e4m3 amax kernel in the bundle for sm_90: the bundle has none");

    // Geometry: tile.tokens tokens per block along x, threads x tile.keys elements along y.
    p = test::valid_scale_params();  // 10 tokens, 4 x 512 elements
    LaunchGeometry g = scale_launch_geometry(m.kernels[3], p);
    CHECK(g.grid_x == 2);  // ceil(10 / 8)
    CHECK(g.grid_y == 1);
    CHECK(g.block_x == 256);
    p.tokens = 16;
    p.heads = 17;  // 8704 elements: 2 blocks of 8192
    g = scale_launch_geometry(m.kernels[3], p);
    CHECK(g.grid_x == 2);
    CHECK(g.grid_y == 2);
    p.tokens = 0;
    CHECK(scale_launch_geometry(m.kernels[3], p).grid_x == 0);
}

TEST_CASE("selection: TMA kernels take the cache layouts a tensor map can describe, and step aside otherwise") {
    // The bundle's priorities: the TMA (Hopper-tier) kernel above the mma tier.
    const Manifest m = parse_bundle({
        test::kernel_json("tma_bf16_d512", "sm_90a", "bf16", 512, 512, 512, 8, 8, "\"paged\", \"lse\", \"tma_kv\"",
                          kCubinBytes, kZeroHash, "prefill", 300),
        test::kernel_json("mma_bf16_d512", "sm_90a", "bf16", 512, 512, 512, 8, 8, "\"varlen\", \"paged\", \"lse\"",
                          kCubinBytes, kZeroHash, "prefill", 200),
    });
    wideattn_prefill_params p = test::valid_params();
    std::string why;
    CHECK(kv_map_unsupported(p).empty());
    CHECK(select_name(m, p, 9, 0, &why) == "tma_bf16_d512@sm_90a");

    SUBCASE("the serving layout's tensor: dims innermost first, byte strides") {
        const KvMapLayout k = kv_map_layout(p, false);
        CHECK(k.dims[kKvMapDimElem] == 512);
        CHECK(k.dims[kKvMapDimHead] == 4);
        CHECK(k.dims[kKvMapDimSlot] == 16);
        CHECK(k.dims[kKvMapDimBlock] == 2048);
        CHECK(k.strides[kKvMapDimHead - 1] == 512 * 2);
        CHECK(k.strides[kKvMapDimSlot - 1] == 4 * 512 * 2);
        CHECK(k.strides[kKvMapDimBlock - 1] == 16 * 4 * 512 * 2);
        p.v_block_stride = 2 * p.k_block_stride;  // K and V blocks interleaved in one allocation
        CHECK(kv_map_layout(p, true).strides[kKvMapDimBlock - 1] == 2 * 16 * 4 * 512 * 2);
        CHECK(kv_map_unsupported(p).empty());
    }
    SUBCASE("head-major blocks ([block][head][slot][d]): slot stride below the heads it must cover") {
        p.v_head_stride = p.block_size * p.head_dim;
        p.v_slot_stride = p.head_dim;
        why = kv_map_unsupported(p);
        CHECK(why.find("v_slot_stride=512 is below num_kv_heads x v_head_stride=32768") != std::string::npos);
        CHECK(select_name(m, p, 9, 0, &why) == "mma_bf16_d512@sm_90a");
    }
    SUBCASE("a head stride below the head vector") {
        p.k_head_stride = p.head_dim / 2;
        CHECK(kv_map_unsupported(p).find("k_head_stride=256 is below head_dim=512") != std::string::npos);
        CHECK(select_name(m, p, 9, 0, &why) == "mma_bf16_d512@sm_90a");
    }
    SUBCASE("a block stride that does not cover the block's slots") {
        p.k_block_stride = p.k_slot_stride * (p.block_size - 1);
        CHECK(kv_map_unsupported(p).find("k_block_stride=30720 is below block_size x k_slot_stride=32768") !=
              std::string::npos);
        CHECK(select_name(m, p, 9, 0, &why) == "mma_bf16_d512@sm_90a");
    }
    SUBCASE("block stride of 2^40 bytes or more") {
        p.k_block_stride = int64_t{1} << 39;  // elements: 2^40 bytes
        CHECK(kv_map_unsupported(p).find("2^40 bytes") != std::string::npos);
    }
    SUBCASE("a single KV head: its stride is never used, so any value is accepted") {
        p.num_q_heads = 8;
        p.num_kv_heads = 1;
        p.k_head_stride = p.v_head_stride = 8;
        p.k_slot_stride = p.v_slot_stride = p.head_dim;
        p.k_block_stride = p.v_block_stride = p.head_dim * p.block_size;
        CHECK(kv_map_unsupported(p).empty());
        CHECK(kv_map_layout(p, false).strides[kKvMapDimHead - 1] == 512 * 2);
        CHECK(select_name(m, p, 9, 0, &why) == "tma_bf16_d512@sm_90a");
    }
    SUBCASE("the refusal names the reason when no other kernel is left") {
        const Manifest only_tma = parse_bundle({
            test::kernel_json("tma_bf16_d512", "sm_90a", "bf16", 512, 512, 512, 8, 8, "\"tma_kv\""),
        });
        p.k_head_stride = p.head_dim * p.block_size;
        p.k_slot_stride = p.head_dim;
        CHECK(select_name(only_tma, p, 9, 0, &why).empty());
        CHECK(why.find("tma_bf16_d512 loads K/V with TMA, which cannot address this cache: k_slot_stride=512") !=
              std::string::npos);
    }
}

TEST_CASE("selection: a TMA kernel steps aside for strides whose products do not fit 64 bits") {
    // Wrapped, such products looked like covering strides, the driver then refused the map and
    // the call failed with WIDEATTN_ERROR_CUDA.
    const Manifest m = parse_bundle({
        test::kernel_json("tma_bf16_d512", "sm_90a", "bf16", 512, 512, 512, 8, 8, "\"paged\", \"lse\", \"tma_kv\"",
                          kCubinBytes, kZeroHash, "prefill", 300),
        test::kernel_json("mma_bf16_d512", "sm_90a", "bf16", 512, 512, 512, 8, 8, "\"varlen\", \"paged\", \"lse\"",
                          kCubinBytes, kZeroHash, "prefill", 200),
    });
    wideattn_prefill_params p = test::valid_params();
    std::string why;
    SUBCASE("num_kv_heads x head stride beyond 64 bits") {
        p.num_q_heads = 16;
        p.num_kv_heads = 2;
        p.k_head_stride = int64_t{1} << 62;
        CHECK(kv_map_unsupported(p) ==
              "k_slot_stride=2048 is below num_kv_heads x k_head_stride=2 x 4611686018427387904 (beyond 64 bits) "
              "(TMA needs each stride to cover the dimension inside it)");
        CHECK(select_name(m, p, 9, 0, &why) == "mma_bf16_d512@sm_90a");
    }
    SUBCASE("block_size x slot stride beyond 64 bits") {
        p.v_slot_stride = int64_t{1} << 62;
        CHECK(kv_map_unsupported(p).find("v_block_stride=32768 is below block_size x v_slot_stride=16 x "
                                         "4611686018427387904 (beyond 64 bits)") == 0);
        CHECK(select_name(m, p, 9, 0, &why) == "mma_bf16_d512@sm_90a");
    }
    SUBCASE("nested strides whose bytes reach 2^40 or do not fit 64 bits") {
        p.num_blocks = 1;
        p.k_block_stride = int64_t{1} << 62;  // 2^63 bytes
        CHECK(kv_map_unsupported(p) ==
              "k_block_stride=4611686018427387904 is 2^40 bytes or more (TMA strides are below 2^40 bytes)");
        p.k_block_stride = INT64_MAX - 7;  // its bytes do not fit 64 bits
        CHECK(kv_map_unsupported(p).find("k_block_stride=9223372036854775800 is 2^40 bytes or more") == 0);
        CHECK(select_name(m, p, 9, 0, &why) == "mma_bf16_d512@sm_90a");
    }
}

namespace {

// What the fake cuTensorMapEncodeTiled below was last called with.
struct EncodeCall {
    int calls = 0;
    CUtensorMapDataType type{};
    cuuint32_t rank = 0;
    const void* base = nullptr;
    cuuint64_t dims[kKvMapRank] = {};
    cuuint64_t strides[kKvMapRank - 1] = {};
    cuuint32_t box[kKvMapRank] = {};
    CUtensorMapSwizzle swizzle{};
    CUresult result = CUDA_SUCCESS;
};
EncodeCall g_encode;

CUresult fake_encode(CUtensorMap*, CUtensorMapDataType type, cuuint32_t rank, void* base, const cuuint64_t* dims,
                     const cuuint64_t* strides, const cuuint32_t* box, const cuuint32_t*, CUtensorMapInterleave,
                     CUtensorMapSwizzle swizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
    ++g_encode.calls;
    g_encode.type = type;
    g_encode.rank = rank;
    g_encode.base = base;
    for (int d = 0; d < kKvMapRank; ++d) g_encode.dims[d] = dims[d], g_encode.box[d] = box[d];
    for (int d = 0; d + 1 < kKvMapRank; ++d) g_encode.strides[d] = strides[d];
    g_encode.swizzle = swizzle;
    return g_encode.result;
}

}  // namespace

TEST_CASE("tensor maps: the driver gets the layout and box the kernel addresses, and failures are named") {
    wideattn_prefill_params p = test::valid_params();
    p.v_block_stride = 2 * p.k_block_stride;
    Driver driver;
    KvTensorMaps maps;
    std::string why;

    SUBCASE("a driver without cuTensorMapEncodeTiled") {
        CHECK(encode_kv_tensor_maps(driver, p, &maps, &why) == WIDEATTN_ERROR_NO_DRIVER);
        CHECK(why.find("lacks cuTensorMapEncodeTiled") != std::string::npos);
    }
    SUBCASE("K then V: bf16, rank 4, 64-element x 16-slot boxes, 128-byte swizzle") {
        g_encode = EncodeCall{};
        driver.cuTensorMapEncodeTiled = &fake_encode;
        REQUIRE(encode_kv_tensor_maps(driver, p, &maps, &why) == WIDEATTN_OK);
        CHECK(g_encode.calls == 2);
        CHECK(g_encode.base == p.v_cache);  // the last call is V's
        CHECK(g_encode.type == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
        CHECK(g_encode.rank == kKvMapRank);
        CHECK(g_encode.swizzle == CU_TENSOR_MAP_SWIZZLE_128B);
        CHECK(g_encode.box[kKvMapDimElem] * 2 == kKvBoxBytes);
        CHECK(g_encode.box[kKvMapDimHead] == 1);
        CHECK(g_encode.box[kKvMapDimSlot] == kKvBoxSlots);
        CHECK(g_encode.box[kKvMapDimBlock] == 1);
        const KvMapLayout v = kv_map_layout(p, true);
        for (int d = 0; d < kKvMapRank; ++d) CHECK(g_encode.dims[d] == v.dims[d]);
        for (int d = 0; d + 1 < kKvMapRank; ++d) CHECK(g_encode.strides[d] == v.strides[d]);
    }
    SUBCASE("a layout tensor maps cannot describe never reaches the driver") {
        g_encode = EncodeCall{};
        driver.cuTensorMapEncodeTiled = &fake_encode;
        p.k_slot_stride = int64_t{1} << 62;
        CHECK(encode_kv_tensor_maps(driver, p, &maps, &why) == WIDEATTN_ERROR_UNSUPPORTED);
        CHECK(why.find("the K/V cache cannot be described as TMA tensors: k_block_stride=") == 0);
        CHECK(g_encode.calls == 0);
    }
    SUBCASE("a refusal by the driver names the cache") {
        g_encode = EncodeCall{};
        g_encode.result = CUDA_ERROR_INVALID_VALUE;
        driver.cuTensorMapEncodeTiled = &fake_encode;
        CHECK(encode_kv_tensor_maps(driver, p, &maps, &why) == WIDEATTN_ERROR_CUDA);
        CHECK(why.find("cuTensorMapEncodeTiled(k_cache) failed") != std::string::npos);
        CHECK(g_encode.calls == 1);
    }
}

TEST_CASE("selection: messages name a compute capability without an sm_ name, and the merge refusal's dtype") {
    CHECK(device_arch_text(9, 0) == "sm_90");
    CHECK(device_arch_text(12, 1) == "sm_121");
    CHECK(device_arch_text(-1, 0) == "compute capability -1.0 (not valid)");
    CHECK(device_arch_text(9, -3) == "compute capability 9.-3 (not valid)");
    CHECK(device_arch_text(9, 10) == "compute capability 9.10 (not valid)");
    // A negative compute capability printed as "sm_-10" up to e2619f8.
    const Manifest m = synthetic_bundle();
    wideattn_prefill_params p = test::valid_params();
    std::string why;
    CHECK(select_name(m, p, -1, 0, &why).empty());
    CHECK(why.find("on compute capability -1.0 (not valid): mma_bf16_d512 (sm_90a) does not run on compute "
                   "capability -1.0 (not valid)") != std::string::npos);
    CHECK(why.find("sm_-") == std::string::npos);
    const Manifest aux = parse_bundle({aux_kernel_json("quantize_e4m3", "sm_90a", "e4m3", "\"paged\""),
                                       aux_kernel_json("amax_e4m3", "sm_90a", "f32", "\"slot_mapping\"")});
    int32_t index = -1;
    CHECK(select_quantize_kernel(aux.kernels, test::valid_quantize_params(), -1, 0, &index, &why) ==
          WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why == "no e4m3 quantise kernel in the bundle for compute capability -1.0 (not valid): quantize_e4m3 "
                 "(sm_90a) does not run on compute capability -1.0 (not valid)");
    // The merge refusal names o_dtype as the other messages do ("o_dtype=3" up to e2619f8).
    const Manifest merge = parse_bundle({test::kernel_json("merge_splits_bf16", "sm_90a", "bf16", 512, 512, 512, 1,
                                                           65536, "\"varlen\"", kCubinBytes, kZeroHash,
                                                           "merge_splits")});
    p.o_dtype = WIDEATTN_DTYPE_F64;
    CHECK(select_merge_kernel(merge.kernels, p, 9, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why == "no split-KV merge kernel in the bundle for o_dtype=f64 on sm_90");
    p.o_dtype = WIDEATTN_DTYPE_BF16;
    CHECK(select_merge_kernel(merge.kernels, p, -2, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why == "no split-KV merge kernel in the bundle for o_dtype=bf16 on compute capability -2.0 (not valid)");
    REQUIRE(select_merge_kernel(merge.kernels, p, 9, 0, &index, &why) == WIDEATTN_OK);
}

namespace {

// A kernel_json entry with e4m3 Q and K/V (bf16 output).
std::string e4m3_kernel_json(const std::string& name, const std::string& features, int priority) {
    std::string entry = test::kernel_json(name, "sm_90a", "bf16", 512, 512, 512, 8, 8, features, kCubinBytes,
                                          kZeroHash, "prefill", priority);
    for (const char* field : {"\"q_dtype\": \"bf16\"", "\"kv_dtype\": \"bf16\""}) {
        const std::string from = field, to = from.substr(0, from.size() - 5) + "e4m3\"";
        entry.replace(entry.find(from), from.size(), to);
    }
    return entry;
}

}  // namespace

// Makes p's V cache a transposed one (WIDEATTN_FLAG_V_TRANSPOSED) of its block size and heads,
// each (block, head) page head_dim rows of block_size codes, pages packed.
static void use_transposed_v(wideattn_prefill_params* p) {
    p->flags = WIDEATTN_FLAG_V_TRANSPOSED;
    p->v_slot_stride = 1;
    p->v_head_stride = int64_t{p->head_dim} * p->block_size;
    p->v_block_stride = p->v_head_stride * p->num_kv_heads;
}

// A transposed V map's sizes in kVtMapDim* order and its byte strides of dimensions 1..3.
static void check_vt_layout(const KvMapLayout& v, const std::array<uint64_t, kKvMapRank>& dims,
                            const std::array<uint64_t, kKvMapRank - 1>& strides) {
    for (int d = 0; d < kKvMapRank; ++d) CHECK_MESSAGE(v.dims[d] == dims[d], "dim " << d);
    for (int d = 0; d + 1 < kKvMapRank; ++d) CHECK_MESSAGE(v.strides[d] == strides[d], "stride of dim " << d + 1);
}

TEST_CASE("selection: the transposed V layout runs only the kernels that read it, and they run nothing else") {
    // The candidate's priority is below the engine-layout kernel's, as in the bundle: only the
    // layout decides between them.
    const Manifest m = parse_bundle({
        e4m3_kernel_json("wgmma_e4m3q_d512", "\"paged\", \"lse\"", 301),
        e4m3_kernel_json("wgmma_e4m3pv_d512", "\"paged\", \"lse\", \"tma_kv\", \"v_transposed\"", 299),
    });
    wideattn_prefill_params p = test::valid_params();
    p.q_dtype = p.kv_dtype = WIDEATTN_DTYPE_E4M3;
    std::string why;
    CHECK(select_name(m, p, 9, 0, &why) == "wgmma_e4m3q_d512@sm_90a");
    int32_t index = -1;
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &why, "wgmma_e4m3pv_d512") == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why.find("wgmma_e4m3pv_d512 reads V only in the transposed layout (flags WIDEATTN_FLAG_V_TRANSPOSED") !=
          std::string::npos);

    use_transposed_v(&p);
    CHECK(kv_map_unsupported(p).empty());
    CHECK(select_name(m, p, 9, 0, &why) == "wgmma_e4m3pv_d512@sm_90a");
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &why, "wgmma_e4m3q_d512") == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why.find("wgmma_e4m3q_d512 reads V in the engine layout v_cache[block][slot][kv_head][d], not the "
                   "transposed layout of WIDEATTN_FLAG_V_TRANSPOSED") != std::string::npos);

    SUBCASE("row boxes: rows of 8 dims x 16 positions, row groups, heads, blocks (block_size 16)") {
        REQUIRE(p.block_size == 16);
        CHECK(v_row_boxes(p.block_size, p.head_dim));
        CHECK_FALSE(v_row_boxes(32, p.head_dim));
        check_vt_layout(transposed_v_map_layout(p, true), {128, 512 / 8, 4, 2048}, {128, 512 * 16, 4 * 512 * 16});
        CHECK(kv_map_key(p, true, p.v_cache).transposed == kMapTransposedRows);
        // A box of kVtRowBytes x kVtBoxRows is the bytes of kVtBoxDims dims x 16 positions.
        CHECK(kVtRowBytes * kVtBoxRows == kVtBoxDims * kVtBoxSlots);
        const KvMapLayout k = kv_map_layout(p, false);  // K keeps the engine layout
        CHECK(k.strides[kKvMapDimSlot - 1] == 4 * 512);
        CHECK(kv_map_key(p, false, p.k_cache).transposed == kMapEngine);
    }
    SUBCASE("16-byte rows: slot positions innermost, then the dim rows, heads and blocks") {
        check_vt_layout(transposed_v_map_layout(p, false), {16, 512, 4, 2048}, {16, 512 * 16, 4 * 512 * 16});
        const KvMapLayout chosen = kv_map_layout(p, true);
        const KvMapLayout want = transposed_v_map_layout(p, true);  // block_size 16: the row form
        for (int d = 0; d < kKvMapRank; ++d) CHECK(chosen.dims[d] == want.dims[d]);
        for (int d = 0; d + 1 < kKvMapRank; ++d) CHECK(chosen.strides[d] == want.strides[d]);
    }
    SUBCASE("block_size 32: always 16-byte rows") {
        p.block_size = 32;
        use_transposed_v(&p);
        p.num_blocks = 1024;
        CHECK_FALSE(v_row_boxes(p.block_size, p.head_dim));
        check_vt_layout(kv_map_layout(p, true), {32, 512, 4, 1024}, {32, 512 * 32, 4 * 512 * 32});
        CHECK(kv_map_key(p, true, p.v_cache).transposed == kMapTransposed);
    }
    SUBCASE("a head stride below one page's rows, a block stride below its heads") {
        p.v_head_stride = int64_t{p.head_dim} * p.block_size - 16;
        CHECK(kv_map_unsupported(p).find("v_head_stride=8176 is below head_dim x block_size = 8192") !=
              std::string::npos);
        CHECK(select_name(m, p, 9, 0, &why).empty());
        p.v_head_stride = int64_t{p.head_dim} * p.block_size;
        p.v_block_stride = p.v_head_stride * 3;
        CHECK(kv_map_unsupported(p).find("v_block_stride=24576 is below num_kv_heads x v_head_stride = 32768") !=
              std::string::npos);
    }
}

TEST_CASE("selection: a single-token kernel runs on its own only for one query token per sequence") {
    // Above the prefill kernel, as a decode kernel that measured faster would be.
    const Manifest m = parse_bundle({
        test::kernel_json("prefill_bf16", "sm_90a", "bf16", 512, 512, 512, 8, 8, "\"varlen\", \"paged\", \"lse\"",
                          kCubinBytes, kZeroHash, "prefill", 300),
        test::kernel_json("decode_bf16", "sm_90a", "bf16", 512, 512, 512, 8, 8,
                          "\"varlen\", \"paged\", \"lse\", \"single_token\"", kCubinBytes, kZeroHash, "prefill", 303),
    });
    wideattn_prefill_params p = test::valid_params();
    std::string why;
    p.total_q = p.num_seqs;  // one token per sequence on average: decode
    CHECK(select_name(m, p, 9, 0, &why) == "decode_bf16@sm_90a");
    p.total_q = 0;  // an empty batch too
    CHECK(select_name(m, p, 9, 0, &why) == "decode_bf16@sm_90a");
    p.total_q = p.num_seqs + 1;  // one sequence with a second token: the prefill kernel
    CHECK(select_name(m, p, 9, 0, &why) == "prefill_bf16@sm_90a");
    p.total_q = 100;
    CHECK(select_name(m, p, 9, 0, &why) == "prefill_bf16@sm_90a");
    // Pinned by name it serves every call; the tuning file's preference does not lift the rule.
    int32_t index = -1;
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &why, "decode_bf16") == WIDEATTN_OK);
    CHECK(m.kernels[index].name == "decode_bf16");
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &why, std::string(), "decode_bf16") == WIDEATTN_OK);
    CHECK(m.kernels[index].name == "prefill_bf16");
    // Alone in the bundle, a multi-token call is refused with the rule named.
    const Manifest alone = parse_bundle({test::kernel_json("decode_bf16", "sm_90a", "bf16", 512, 512, 512, 8, 8,
                                                           "\"varlen\", \"paged\", \"lse\", \"single_token\"")});
    CHECK(select_kernel(alone.kernels, p, 9, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why.find("decode_bf16 runs on its own only for one query token per sequence (decode), not total_q=100 "
                   "over num_seqs=2") != std::string::npos);
}

TEST_CASE("selection: the built bundle's decode_bf16w4_d512 is the BF16 decode default, single-token calls only") {
    Manifest m;
    std::string err;
    REQUIRE_MESSAGE(load_manifest(test::built_bundle(), &m, &err), err);
    const bool built = std::any_of(m.kernels.begin(), m.kernels.end(), [](const ManifestKernel& k) {
        return k.name == "decode_bf16w4_d512" && k.arch == "sm_90a";
    });
    if (!built) {
        MESSAGE("the built bundle has no decode_bf16w4_d512 for sm_90a");
        return;
    }
    wideattn_prefill_params p = test::valid_params();
    p.total_q = p.num_seqs;  // decode: one query token per sequence
    // Above wgmma_bf16c2p_d512 and decode_bf16_d512 (its 8-warp form): one query token per sequence
    // goes to it, more tokens do not (and a few tokens a sequence go to the one-CTA prefill kernel:
    // the two-CTA one is many_tokens).
    CHECK(select_name(m, p, 9, 0, &err) == "decode_bf16w4_d512@sm_90a");
    p.total_q = p.num_seqs + 1;
    CHECK(select_name(m, p, 9, 0, &err) == "wgmma_bf16_d512@sm_90a");
    p.total_q = p.num_seqs;
    int32_t index = -1;
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &err, "decode_bf16w4_d512") == WIDEATTN_OK);
    CHECK(m.kernels[index].name == "decode_bf16w4_d512");
    CHECK(m.kernels[index].arch == "sm_90a");
    // A tuning file's choice for the decode class takes it on single-token calls only.
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &err, std::string(), "decode_bf16w4_d512") == WIDEATTN_OK);
    CHECK(m.kernels[index].name == "decode_bf16w4_d512");
    p.total_q = p.num_seqs + 1;
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &err, std::string(), "decode_bf16w4_d512") == WIDEATTN_OK);
    CHECK(m.kernels[index].name == "wgmma_bf16_d512");
    // Pinned, it serves a multi-token call too (a block per query token).
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &err, "decode_bf16w4_d512") == WIDEATTN_OK);
    CHECK(m.kernels[index].name == "decode_bf16w4_d512");
}

TEST_CASE("selection: the built bundle's decode_e4m3vt kernels serve single-token calls over the transposed V layout") {
    Manifest m;
    std::string err;
    REQUIRE_MESSAGE(load_manifest(test::built_bundle(), &m, &err), err);
    const bool built = std::any_of(m.kernels.begin(), m.kernels.end(), [](const ManifestKernel& k) {
        return k.name == "decode_e4m3vt_d512" && k.arch == "sm_90a";
    });
    if (!built) {
        MESSAGE("the built bundle has no decode_e4m3vt_d512 for sm_90a");
        return;
    }
    wideattn_prefill_params p = test::valid_params();
    p.kv_dtype = WIDEATTN_DTYPE_E4M3;
    use_transposed_v(&p);
    p.total_q = p.num_seqs;  // one query token per sequence
    CHECK(select_name(m, p, 9, 0, &err) == "decode_e4m3vt_d512@sm_90a");
    p.total_q = p.num_seqs + 1;  // more: the 64-key prefill kernel
    CHECK(select_name(m, p, 9, 0, &err) == "wgmma_e4m3alt64kv_d512@sm_90a");
    p.q_dtype = WIDEATTN_DTYPE_E4M3;
    CHECK(select_name(m, p, 9, 0, &err) == "wgmma_e4m3alt64_d512@sm_90a");
    p.total_q = p.num_seqs;
    CHECK(select_name(m, p, 9, 0, &err) == "decode_e4m3vtq_d512@sm_90a");
    // The engine layout: the engine-layout decode kernel, never the transposed one.
    p.flags = 0;
    p.v_slot_stride = p.k_slot_stride;
    p.v_head_stride = p.k_head_stride;
    p.v_block_stride = p.k_block_stride;
    CHECK(select_name(m, p, 9, 0, &err) == "decode_e4m3q_d512@sm_90a");
}

TEST_CASE("selection: a few-tokens kernel runs on its own only for at most 8 query tokens per sequence") {
    // Above the prefill kernel and below the single-token one, as a verification kernel that
    // measured faster than the prefill kernel would be.
    const Manifest m = parse_bundle({
        test::kernel_json("prefill_bf16", "sm_90a", "bf16", 512, 512, 512, 8, 8, "\"varlen\", \"paged\", \"lse\"",
                          kCubinBytes, kZeroHash, "prefill", 300),
        test::kernel_json("verify_bf16", "sm_90a", "bf16", 512, 512, 512, 8, 8,
                          "\"varlen\", \"paged\", \"lse\", \"few_tokens\"", kCubinBytes, kZeroHash, "prefill", 302),
        test::kernel_json("decode_bf16", "sm_90a", "bf16", 512, 512, 512, 8, 8,
                          "\"varlen\", \"paged\", \"lse\", \"single_token\"", kCubinBytes, kZeroHash, "prefill", 303),
    });
    wideattn_prefill_params p = test::valid_params();
    std::string why;
    p.total_q = p.num_seqs;  // decode: the single-token kernel ranks first
    CHECK(select_name(m, p, 9, 0, &why) == "decode_bf16@sm_90a");
    p.total_q = p.num_seqs + 1;
    CHECK(select_name(m, p, 9, 0, &why) == "verify_bf16@sm_90a");
    p.total_q = kFewTokensPerSeq * p.num_seqs;  // 8 per sequence on average: still a verification step
    CHECK(select_name(m, p, 9, 0, &why) == "verify_bf16@sm_90a");
    p.total_q = kFewTokensPerSeq * p.num_seqs + 1;
    CHECK(select_name(m, p, 9, 0, &why) == "prefill_bf16@sm_90a");
    int32_t index = -1;
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &why, "verify_bf16") == WIDEATTN_OK);
    CHECK(m.kernels[index].name == "verify_bf16");
    const Manifest alone = parse_bundle({test::kernel_json("verify_bf16", "sm_90a", "bf16", 512, 512, 512, 8, 8,
                                                           "\"varlen\", \"paged\", \"lse\", \"few_tokens\"")});
    CHECK(select_kernel(alone.kernels, p, 9, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why.find("verify_bf16 runs on its own only for at most 8 query tokens per sequence on average (decode "
                   "and verification steps), not total_q=17 over num_seqs=2") != std::string::npos);
}

TEST_CASE("selection: a many-tokens kernel runs on its own only where every sequence has more than 8 query tokens") {
    static_assert(shortest_seq_lower_bound(100, 1, 0) == 100 && shortest_seq_lower_bound(100, 2, 0) == 0 &&
                  shortest_seq_lower_bound(100, 2, 50) == 50 && shortest_seq_lower_bound(100, 2, 95) == 5 &&
                  shortest_seq_lower_bound(2111, 64, 2048) == 0 && shortest_seq_lower_bound(5, 0, 5) == 0);
    // Above the prefill kernel, as the two-CTA kernel is in the bundle.
    const Manifest m = parse_bundle({
        test::kernel_json("prefill_bf16", "sm_90a", "bf16", 512, 512, 512, 8, 8, "\"varlen\", \"paged\", \"lse\"",
                          kCubinBytes, kZeroHash, "prefill", 288),
        test::kernel_json("pair_bf16", "sm_90a", "bf16", 512, 512, 512, 8, 8,
                          "\"varlen\", \"paged\", \"lse\", \"many_tokens\"", kCubinBytes, kZeroHash,
                          "prefill", 300),
    });
    wideattn_prefill_params p = test::valid_params();
    std::string why;
    struct Call {
        int32_t num_seqs, total_q, max_seqlen_q;
        const char* expected;
    };
    const Call calls[] = {
        {1, kFewTokensPerSeq + 1, 0, "pair_bf16@sm_90a"},     // one sequence: total_q is its length
        {1, kFewTokensPerSeq, 0, "prefill_bf16@sm_90a"},      // 8 tokens: the second row group empty
        {1, 1, 1, "prefill_bf16@sm_90a"},                     // decode
        {2, 100, 0, "prefill_bf16@sm_90a"},                   // no hint: the shortest is not bounded
        {2, 100, 50, "pair_bf16@sm_90a"},                     // 50 + 50
        {2, 100, 91, "pair_bf16@sm_90a"},                     // at least 9 + 91
        {2, 100, 92, "prefill_bf16@sm_90a"},                  // possibly 8 + 92
        {32, 160, 5, "prefill_bf16@sm_90a"},                  // a verification step, 5 tokens each
        {64, 2048 + 63, 2048, "prefill_bf16@sm_90a"},         // a prompt chunk with 63 decodes
        {4, 4 * 4096, 4096, "pair_bf16@sm_90a"},              // four prompts
    };
    for (const Call& c : calls) {
        p.num_seqs = c.num_seqs;
        p.total_q = c.total_q;
        p.max_seqlen_q = c.max_seqlen_q;
        CAPTURE(c.num_seqs);
        CAPTURE(c.total_q);
        CAPTURE(c.max_seqlen_q);
        CHECK(select_name(m, p, 9, 0, &why) == c.expected);
    }
    // Pinned, it serves any call; alone in a bundle it refuses the calls the rule leaves out, and says why.
    p.num_seqs = 32;
    p.total_q = 160;
    p.max_seqlen_q = 5;
    int32_t index = -1;
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &why, "pair_bf16") == WIDEATTN_OK);
    CHECK(m.kernels[index].name == "pair_bf16");
    const Manifest alone = parse_bundle({test::kernel_json("pair_bf16", "sm_90a", "bf16", 512, 512, 512, 8, 8,
                                                           "\"varlen\", \"paged\", \"lse\", \"many_tokens\"")});
    CHECK(select_kernel(alone.kernels, p, 9, 0, &index, &why) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why.find("pair_bf16 runs on its own only where every sequence has more than 8 query tokens, which "
                   "total_q=160 over num_seqs=32 with max_seqlen_q=5 does not bound") != std::string::npos);
}

TEST_CASE("selection: the built bundle's two-CTA kernel serves prompts, the one-CTA kernel short sequences") {
    Manifest m;
    std::string err;
    REQUIRE_MESSAGE(load_manifest(test::built_bundle(), &m, &err), err);
    const auto built = [&](const char* name) {
        return std::any_of(m.kernels.begin(), m.kernels.end(),
                           [&](const ManifestKernel& k) { return k.name == name && k.arch == "sm_90a"; });
    };
    if (!built("wgmma_bf16c2p_d512")) {
        MESSAGE("the built bundle has no wgmma_bf16c2p_d512 for sm_90a");
        return;
    }
    wideattn_prefill_params p = test::valid_params();
    p.num_seqs = 1;
    p.total_q = 16384;
    CHECK(select_name(m, p, 9, 0, &err) == "wgmma_bf16c2p_d512@sm_90a");
    // The former default, a candidate (-Dcandidate_kernels=wgmma_bf16c2_d512), runs when pinned.
    if (built("wgmma_bf16c2_d512")) {
        int32_t index = -1;
        REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &err, "wgmma_bf16c2_d512") == WIDEATTN_OK);
        CHECK(m.kernels[index].name == "wgmma_bf16c2_d512");
    }
    p.total_q = 5;  // a verification step of one sequence
    CHECK(select_name(m, p, 9, 0, &err) == "wgmma_bf16_d512@sm_90a");
    p.num_seqs = 64;  // a 2048-token chunk with 63 decodes
    p.total_q = 2048 + 63;
    p.max_seqlen_q = 2048;
    CHECK(select_name(m, p, 9, 0, &err) == "wgmma_bf16_d512@sm_90a");
}

namespace {

// A kernel_json entry with bf16 Q, e4m3 K/V and bf16 output.
std::string e4m3_kv_kernel_json(const std::string& name, const std::string& features, int priority) {
    std::string entry = test::kernel_json(name, "sm_90a", "bf16", 512, 512, 512, 8, 8, features, kCubinBytes,
                                          kZeroHash, "prefill", priority);
    const std::string from = "\"kv_dtype\": \"bf16\"";
    entry.replace(entry.find(from), from.size(), "\"kv_dtype\": \"e4m3\"");
    return entry;
}

}  // namespace

TEST_CASE("selection: a k_from_v_only kernel serves K-from-V calls alone and no K+V call, pinned or not") {
    // The K-from-V decode kernel ranks above the K+V ones here (in the bundle it is below): the
    // features alone keep each call on its own kernels.
    const Manifest m = parse_bundle({
        test::kernel_json("reference_f64", "sm_90a", "f64", 32, 512, 32, 1, 65536,
                          "\"varlen\", \"paged\", \"lse\", \"k_from_v\"", kCubinBytes, kZeroHash, "prefill", 100),
        e4m3_kv_kernel_json("wgmma_e4m3kv_d512", "\"varlen\", \"paged\", \"lse\"", 302),
        e4m3_kv_kernel_json("decode_e4m3_d512", "\"varlen\", \"paged\", \"lse\", \"single_token\"", 303),
        e4m3_kv_kernel_json("decode_e4m3kfv_d512",
                            "\"varlen\", \"paged\", \"lse\", \"single_token\", \"k_from_v\", \"k_from_v_only\"", 310),
    });
    wideattn_prefill_params p = test::valid_params();
    p.kv_dtype = WIDEATTN_DTYPE_E4M3;
    p.total_q = p.num_seqs;  // decode
    std::string why;
    int32_t index = -1;
    // K+V: never the K-from-V kernel, not even pinned.
    CHECK(select_name(m, p, 9, 0, &why) == "decode_e4m3_d512@sm_90a");
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &why, "decode_e4m3kfv_d512") == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(why.find("decode_e4m3kfv_d512 rebuilds K from V and serves only calls with WIDEATTN_FLAG_K_FROM_V") !=
          std::string::npos);
    // A tuning file's preference does not lift the rule either.
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &why, std::string(), "decode_e4m3kfv_d512") == WIDEATTN_OK);
    CHECK(m.kernels[index].name == "decode_e4m3_d512");

    // K from V, one token per sequence: the K-from-V kernel, the only one of these dtypes.
    p.flags = WIDEATTN_FLAG_K_FROM_V;
    p.k_cache = nullptr;
    CHECK(select_name(m, p, 9, 0, &why) == "decode_e4m3kfv_d512@sm_90a");
    p.total_q = 0;
    CHECK(select_name(m, p, 9, 0, &why) == "decode_e4m3kfv_d512@sm_90a");
    // More tokens per sequence: no e4m3 kernel rebuilds K (the single-token rule and the K+V
    // kernels' refusal named), unless the K-from-V kernel is pinned (one block per token).
    p.total_q = p.num_seqs + 1;
    CHECK(select_name(m, p, 9, 0, &why).empty());
    CHECK(why.find("decode_e4m3kfv_d512 runs on its own only for one query token per sequence (decode)") !=
          std::string::npos);
    CHECK(why.find("wgmma_e4m3kv_d512 reads K from k_cache and cannot rebuild it from V") != std::string::npos);
    REQUIRE(select_kernel(m.kernels, p, 9, 0, &index, &why, "decode_e4m3kfv_d512") == WIDEATTN_OK);
    CHECK(m.kernels[index].name == "decode_e4m3kfv_d512");
    // A bf16 V cache with fp64 output: the reference, as before.
    p.kv_dtype = WIDEATTN_DTYPE_BF16;
    p.o_dtype = WIDEATTN_DTYPE_F64;
    p.total_q = p.num_seqs;
    CHECK(select_name(m, p, 9, 0, &why) == "reference_f64@sm_90a");
    // A bf16 V cache with bf16 output: no kernel (the e4m3 one's dtypes do not match).
    p.o_dtype = WIDEATTN_DTYPE_BF16;
    CHECK(select_name(m, p, 9, 0, &why).empty());
}

TEST_CASE("selection: the built bundle's K-from-V decode kernels declare what selection needs") {
    Manifest m;
    std::string err;
    REQUIRE_MESSAGE(load_manifest(test::built_bundle(), &m, &err), err);
    const auto named = [&](const char* name) {
        return std::find_if(m.kernels.begin(), m.kernels.end(), [&](const ManifestKernel& x) { return x.name == name; });
    };
    const auto k = named("decode_e4m3kfvb_d512"), reference = named("decode_e4m3kfv_d512");
    if (k == m.kernels.end() || reference == m.kernels.end()) {
        MESSAGE("the bundle has no decode_e4m3kfvb_d512 or decode_e4m3kfv_d512 (no sm_90a build)");
        return;
    }
    for (const char* feature : {kFeatureKFromV, kFeatureKFromVOnly, kFeatureSingleToken, kFeatureSplitKv})
        CHECK_MESSAGE(reference->has_feature(feature), feature);
    CHECK(!reference->split_symbol.empty());
    CHECK(k->q_dtype == WIDEATTN_DTYPE_BF16);
    CHECK(k->kv_dtype == WIDEATTN_DTYPE_E4M3);
    CHECK(k->o_dtype == WIDEATTN_DTYPE_BF16);
    for (const char* feature : {kFeatureKFromV, kFeatureKFromVOnly, kFeatureSingleToken, kFeatureSplitKv})
        CHECK_MESSAGE(k->has_feature(feature), feature);
    CHECK(!k->split_symbol.empty());
    // Every other kernel of its dtypes that rebuilds K (decode_e4m3kfv_d512, whose bits it writes,
    // and any candidate) ranks below it, so selection picks it.
    for (const ManifestKernel& x : m.kernels) {
        if (x.name == k->name || !x.has_feature(kFeatureKFromV)) continue;
        CAPTURE(x.name);
        if (x.q_dtype == k->q_dtype && x.kv_dtype == k->kv_dtype && x.o_dtype == k->o_dtype)
            CHECK(x.priority < k->priority);
    }
}
