// test_manifest.cpp - manifest generation (the built bundle) and parsing (every field checked,
// clear errors naming the kernel and field).
#include <doctest/doctest.h>

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "dispatch/manifest.h"
#include "dispatch/manifest_format.h"
#include "tests/fuzz/manifest_fuzz_check.h"
#include "tests/test_helpers.h"

using namespace wideattn;

namespace {
constexpr int32_t kSm120SmemLimitBytes = 99 * 1024;  // opt-in dynamic shared memory per block on sm_120
}  // namespace

TEST_CASE("manifest: the built bundle lists the fp64, quantise and amax kernels for every configured arch") {
    Manifest m;
    std::string err;
    REQUIRE_MESSAGE(load_manifest(test::built_bundle(), &m, &err), err);
    CHECK(m.format == kManifestFormatVersion);
    std::set<std::string> reference_archs, quantize_archs, amax_archs, amax_pow2_archs, mma_archs, ping_pong_archs, merge_archs,
        hopper_e4m3kv_archs;
    for (const ManifestKernel& k : m.kernels) {
        CHECK(k.cubin_bytes > 0);
        CHECK(k.registers > 0);
        CHECK(k.registers <= 255);
        // The exceptions of the kernel table ('spills_allowed_sm', bundle/meson.build): the e4m3-Q
        // kernel on sm_90 and the ping-pong BF16 kernel on sm_120a (its block-table test).
        const bool spills_allowed = (k.name == "mma_e4m3q_d512" && (k.arch == "sm_90" || k.arch == "sm_90a")) ||
                                    (k.name == "mma_bf16_d512_pp" && k.arch == "sm_120a");
        CHECK((spills_allowed || k.spill_stores == 0));
        CHECK((spills_allowed || k.spill_loads == 0));
        // The cubin on disk is the one the manifest describes.
        const std::string image = test::read_file(test::built_bundle() + "/" + k.cubin);
        CHECK(image.size() == k.cubin_bytes);
        char hash[24];
        std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a64(image.data(), image.size())));
        CHECK(k.cubin_fnv1a64 == hash);
        if (k.name == "quantize_e4m3") {
            quantize_archs.insert(k.arch);
            CHECK(k.kind == "quantize_e4m3");
            CHECK(k.kv_dtype == WIDEATTN_DTYPE_E4M3);
            CHECK(k.has_feature("flat_destination"));
        } else if (k.name == "amax_e4m3" || k.name == "amax_e4m3_pow2") {
            const bool pow2 = k.name == "amax_e4m3_pow2";
            (pow2 ? amax_pow2_archs : amax_archs).insert(k.arch);
            CHECK(k.kind == "amax_e4m3");
            CHECK(k.q_dtype == WIDEATTN_DTYPE_BF16);
            CHECK(k.o_dtype == WIDEATTN_DTYPE_F32);
            CHECK(k.tile_tokens > 0);
            CHECK(k.has_feature("power_of_two") == pow2);
        } else if (k.name == "merge_splits_bf16" || k.name == "merge_splits_bf16_rows") {
            if (k.name == "merge_splits_bf16") merge_archs.insert(k.arch);
            CHECK(k.kind == "merge_splits");
            CHECK(k.o_dtype == WIDEATTN_DTYPE_BF16);
            CHECK(k.split_symbol.empty());
        } else if (k.name == "k_from_v_rebuild") {
            CHECK(k.kind == "k_from_v_rebuild");
            CHECK(k.o_dtype == WIDEATTN_DTYPE_BF16);
            CHECK(k.has_feature("e4m3_v"));
            CHECK(k.split_symbol.empty());
        } else {
            CHECK(k.kind == "prefill");
        }
        // Every prefill kernel but the fp64 reference has a split-KV entry, checked by ptxas apart.
        if (k.kind == "prefill" && k.name != "reference_f64") {
            CHECK(k.has_feature("split_kv"));
            CHECK(k.split_symbol == k.symbol + "_split");
            CHECK(k.split_registers > 0);
        }
        if (k.name == "reference_f64") {
            reference_archs.insert(k.arch);
            CHECK(k.o_dtype == 3);
            CHECK(k.symbol == "wideattn_reference_f64");
            CHECK(k.has_feature("lse"));
            CHECK(k.head_dim_max == 512);
        }
        // The Hopper kernel for bf16 Q over an e4m3 cache: sm_90a only, with the split-KV entry.
        if (k.name == "wgmma_e4m3kv_d512") {
            hopper_e4m3kv_archs.insert(k.arch);
            CHECK(k.arch == "sm_90a");
            CHECK(k.q_dtype == WIDEATTN_DTYPE_BF16);
            CHECK(k.kv_dtype == WIDEATTN_DTYPE_E4M3);
            CHECK(k.o_dtype == WIDEATTN_DTYPE_BF16);
            CHECK(k.has_feature("fp8_kv"));
            CHECK_FALSE(k.has_feature("fp8_q"));
        }
        // Both mma-tier BF16 kernels, with and without ping-pong, fit sm_120's limits on every arch.
        if (k.name == "mma_bf16_d512" || k.name == "mma_bf16_d512_pp") {
            (k.name == "mma_bf16_d512" ? mma_archs : ping_pong_archs).insert(k.arch);
            CHECK(k.dynamic_smem <= kSm120SmemLimitBytes);
            CHECK(k.q_dtype == WIDEATTN_DTYPE_BF16);
            CHECK(k.kv_dtype == WIDEATTN_DTYPE_BF16);
        }
    }
    // Each cubin carries its own priority (the table's, or its arch_priority for that arch): no two
    // kernels share one on an arch; on sm_90a each Hopper-tier kernel outranks the mma-tier kernel
    // of its dtypes, the transposed-V kernels stay below wgmma_e4m3q_d512 with wgmma_e4m3alt64_d512
    // first among them for e4m3 Q, wgmma_bf16c2p_d512 (two CTAs a tile, the BF16 prefill default)
    // outranks wgmma_bf16_d512 (one), the candidates wgmma_bf16c2_d512 and wgmma_bf16c2pp_d512 (the
    // former default and its ordered form, where the bundle has them) stay below both,
    // decode_bf16w4_d512 outranks wgmma_bf16c2p_d512, wgmma_bf16_d512 and decode_bf16_d512 (its
    // 8-warp form), merge_splits_bf16_rows outranks merge_splits_bf16 on sm_90a and only there; the
    // mma-tier BF16 kernel without ping-pong outranks the one with everywhere but on sm_120a, where
    // ping-pong (the published design) comes first.
    std::map<std::pair<std::string, std::string>, int32_t> priority_of;  // (name, arch)
    std::map<std::string, std::set<int32_t>> priorities_on;              // arch -> priorities
    for (const ManifestKernel& k : m.kernels) {
        CAPTURE(k.name);
        CAPTURE(k.arch);
        CHECK(priority_of.emplace(std::make_pair(k.name, k.arch), k.priority).second);
        CHECK(priorities_on[k.arch].insert(k.priority).second);
    }
    auto outranks = [&](const std::string& first, const std::string& second, const std::string& arch) {
        CAPTURE(first);
        CAPTURE(arch);
        const auto a = priority_of.find({first, arch});
        const auto b = priority_of.find({second, arch});
        REQUIRE(a != priority_of.end());
        REQUIRE(b != priority_of.end());
        CHECK(a->second > b->second);
    };
    for (const auto& [key, priority] : priority_of) {
        const std::string& arch = key.second;
        if (key.first == "wgmma_bf16_d512") outranks("wgmma_bf16_d512", "mma_bf16_d512", arch);
        if (key.first == "wgmma_e4m3q_d512") outranks("wgmma_e4m3q_d512", "mma_e4m3q_d512", arch);
        if (key.first == "wgmma_e4m3kv_d512") outranks("wgmma_e4m3kv_d512", "mma_e4m3_d512", arch);
        if (key.first == "wgmma_e4m3pv_d512") outranks("wgmma_e4m3q_d512", "wgmma_e4m3pv_d512", arch);
        if (key.first == "wgmma_e4m3alt64_d512") {
            outranks("wgmma_e4m3alt64_d512", "wgmma_e4m3pv_d512", arch);
            outranks("wgmma_e4m3alt64_d512", "wgmma_e4m3alt_d512", arch);
            outranks("wgmma_e4m3q_d512", "wgmma_e4m3alt64_d512", arch);
        }
        if (key.first == "wgmma_bf16c2p_d512") outranks("wgmma_bf16c2p_d512", "wgmma_bf16_d512", arch);
        if (key.first == "wgmma_bf16c2_d512" || key.first == "wgmma_bf16c2pp_d512") {  // candidates
            outranks("wgmma_bf16c2p_d512", key.first, arch);
            outranks("wgmma_bf16_d512", key.first, arch);
        }
        if (key.first == "decode_bf16w4_d512") {
            outranks("decode_bf16w4_d512", "wgmma_bf16_d512", arch);
            outranks("decode_bf16w4_d512", "wgmma_bf16c2p_d512", arch);
        }
        if (key.first == "decode_bf16_d512") outranks("decode_bf16w4_d512", "decode_bf16_d512", arch);
        if (key.first == "merge_splits_bf16_rows") {  // the sm_90a merge; merge_splits_bf16 elsewhere
            if (arch == "sm_90a")
                outranks("merge_splits_bf16_rows", "merge_splits_bf16", arch);
            else
                outranks("merge_splits_bf16", "merge_splits_bf16_rows", arch);
        }
        if (key.first != "mma_bf16_d512_pp") continue;
        if (arch == "sm_120a")
            outranks("mma_bf16_d512_pp", "mma_bf16_d512", arch);
        else
            outranks("mma_bf16_d512", "mma_bf16_d512_pp", arch);
    }

    const char* configured = std::getenv("WIDEATTN_TEST_ARCHS");  // set by tests/meson.build
    REQUIRE(configured);
    std::string archs = configured;
    size_t start = 0;
    while (start < archs.size()) {
        const size_t comma = archs.find(',', start);
        const std::string arch = archs.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        CAPTURE(arch);
        CHECK(reference_archs.count(arch) == 1);
        CHECK(quantize_archs.count(arch) == 1);
        CHECK(merge_archs.count(arch) == 1);
        CHECK(amax_archs.count(arch) == 1);
        CHECK(amax_pow2_archs.count(arch) == 1);
        CHECK(mma_archs.count(arch) == 1);
        CHECK(ping_pong_archs.count(arch) == 1);
        CHECK(hopper_e4m3kv_archs.count(arch) == (arch == "sm_90a" ? 1u : 0u));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
}

TEST_CASE("manifest: parses a synthetic manifest") {
    Manifest m;
    std::string err;
    REQUIRE_MESSAGE(parse_manifest(test::manifest_json({test::kernel_json("mma", "sm_90a", "bf16", 512, 512, 512, 8, 8),
                                                         test::kernel_json("ref", "sm_80", "f64", 32, 512, 32, 1, 64)}),
                                   &m, &err),
                    err);
    REQUIRE(m.kernels.size() == 2);
    CHECK(m.kernels[0].arch_major == 9);
    CHECK(m.kernels[0].arch_minor == 0);
    CHECK(m.kernels[0].arch_specific);
    CHECK_FALSE(m.kernels[1].arch_specific);
    CHECK(m.kernels[1].o_dtype == WIDEATTN_DTYPE_F64);
    CHECK(m.kernels[0].features_csv == "varlen,paged,lse");
}

TEST_CASE("manifest: parse_arch") {
    int32_t major = 0, minor = 0;
    bool specific = false;
    CHECK(parse_arch("sm_120a", &major, &minor, &specific));
    CHECK(major == 12);
    CHECK(minor == 0);
    CHECK(specific);
    CHECK(parse_arch("sm_86", &major, &minor, &specific));
    CHECK(major == 8);
    CHECK(minor == 6);
    CHECK_FALSE(specific);
    // sm_00a and sm_05: a major version of 0 (found by the manifest fuzzer).
    for (const char* bad : {"", "sm_", "sm_9", "compute_90", "sm_9x", "sm_1200", "sm_00a", "sm_05", "sm_012"})
        CHECK_FALSE(parse_arch(bad, &major, &minor, &specific));
}

TEST_CASE("manifest: the split entry is there exactly when the features say split_kv") {
    Manifest m;
    std::string err;
    const std::string split = test::split_kernel_json("mma", "sm_90a");
    REQUIRE_MESSAGE(parse_manifest(test::manifest_json({split}), &m, &err), err);
    CHECK(m.kernels[0].split_symbol == "wideattn_mma_split");
    CHECK(m.kernels[0].split_registers == 128);
    CHECK(m.kernels[0].split_spill_bytes == 0);
    auto refused = [&](std::string entry, const std::string& from, const std::string& to) {
        entry.replace(entry.find(from), from.size(), to);
        CHECK_FALSE(parse_manifest(test::manifest_json({entry}), &m, &err));
        return err;
    };
    CHECK(refused(split, ", \"split_kv\"", "") ==
          "manifest.json: kernels[0] (mma): field 'split_symbol' must be absent: the features do not list \"split_kv\"");
    std::string no_symbol = split;
    no_symbol.replace(no_symbol.find(", \"split_kv\""), std::string(", \"split_kv\"").size(), "");
    CHECK(refused(no_symbol, "\"split_symbol\": \"wideattn_mma_split\", ", "") ==
          "manifest.json: kernels[0] (mma): field 'split_ptxas' must be absent without a split_symbol");
    CHECK(refused(split, "\"split_symbol\": \"wideattn_mma_split\"", "\"split_symbol\": \"wideattn_mma\"") ==
          "manifest.json: kernels[0] (mma): field 'split_symbol' must be a non-empty string other than symbol");
    CHECK(refused(test::kernel_json("mma", "sm_90a", "bf16", 512, 512, 512, 8, 8,
                                    "\"varlen\", \"split_kv\""),
                  "\"varlen\"", "\"varlen\"") ==
          "manifest.json: kernels[0] (mma): field 'split_symbol' must be present: the features list \"split_kv\"");
    CHECK(refused(split, "\"split_ptxas\": {\"registers\": 128", "\"split_ptxas\": {\"registers\": 300")
              .find("field 'split_ptxas.registers'") != std::string::npos);
}

TEST_CASE("manifest: errors name the kernel and the field") {
    struct Case {
        std::string text;
        std::string expected;
    };
    const std::string good = test::kernel_json("mma", "sm_90a", "bf16", 512, 512, 512, 8, 8);
    auto replace = [&](const std::string& from, const std::string& to) {
        std::string s = good;
        s.replace(s.find(from), from.size(), to);
        return test::manifest_json({s});
    };
    const Case cases[] = {
        {"not json", "not valid JSON"},
        {"{\"kernels\": []}", "missing numeric field 'format'"},
        {"{\"format\": 2, \"kernels\": []}", "format 2 is not the supported format 1"},
        {"{\"format\": 1}", "missing array field 'kernels'"},
        {replace("\"arch\": \"sm_90a\"", "\"arch\": \"gfx90a\""), "kernels[0] (mma): field 'arch'"},
        {replace("\"o_dtype\": \"bf16\"", "\"o_dtype\": \"int8\""), "field 'o_dtype' must be a dtype name"},
        {replace("\"kind\": \"prefill\"", "\"kind\": \"decode\""),
         "field 'kind' must be \"prefill\", \"merge_splits\", \"quantize_e4m3\", \"amax_e4m3\" or \"k_from_v_rebuild\""},
        {replace("\"threads\": 256", "\"threads\": 4096"), "field 'threads' must be an integer in 32..1024"},
        {replace("\"threads\": 256", "\"threads\": 2.5"), "field 'threads'"},
        {replace("\"cubin\": \"mma.sm_90a.cubin\"", "\"cubin\": \"../etc/passwd\""), "field 'cubin'"},
        {replace("\"symbol\": \"wideattn_mma\", ", ""), "field 'symbol' must be a string"},
        {replace("\"registers\": 128", "\"registers\": 300"), "field 'ptxas.registers'"},
        {replace("\"min\": 8, \"max\": 8", "\"min\": 9, \"max\": 8"), "min <= max"},
        {replace("\"features\": [\"varlen\", \"paged\", \"lse\"]", "\"features\": [1]"), "field 'features'"},
        {replace("\"features\": [\"varlen\", \"paged\", \"lse\"]", "\"features\": [\"tma_kv\", \"k_from_v\"]"),
         "field 'features' must be not both \"tma_kv\" and \"k_from_v\""},
        {replace("\"features\": [\"varlen\", \"paged\", \"lse\"]", "\"features\": [\"varlen\", \"k_from_v_only\"]"),
         "field 'features' must be \"k_from_v_only\" needs \"k_from_v\""},
        {replace("\"features\": [\"varlen\", \"paged\", \"lse\"]", "\"features\": [\"varlen\", \"cta_pair\"]"),
         "field 'features' must be \"cta_pair\" only with min_sm >= 90 (thread-block clusters), not 80"},
        {replace("\"features\": [\"varlen\", \"paged\", \"lse\"]", "\"features\": [\"varlen\", \"power_of_two\"]"),
         "field 'features' must be \"power_of_two\" only on a kernel of kind \"amax_e4m3\""},
        {replace("\"priority\": 0, ", ""), "kernels[0] (mma): field 'priority' must be an integer in 0..1048576"},
        {replace("\"priority\": 0", "\"priority\": -1"), "field 'priority' must be an integer"},
        {replace("\"priority\": 0", "\"priority\": \"high\""), "field 'priority' must be an integer"},
        {replace("\"cubin_fnv1a64\": \"0000000000000000\"", "\"cubin_fnv1a64\": \"00000000000000G0\""),
         "field 'cubin_fnv1a64' must be 16 lowercase hex digits (not '00000000000000G0')"},
        {replace("\"name\": \"mma\"", "\"name\": \"\""), "field 'name' must be a non-empty string"},
        {"[1, 2]", "manifest.json: the top level is not an object"},
        {"{\"format\": 1, \"library_version\": 1, \"kernels\": []}", "field 'library_version' must be a string"},
    };
    for (const Case& c : cases) {
        Manifest m;
        std::string err;
        CAPTURE(c.text);
        CHECK_FALSE(parse_manifest(c.text, &m, &err));
        CHECK_MESSAGE(err.find(c.expected) != std::string::npos, err);
    }
}

TEST_CASE("manifest: a missing bundle directory is a clear error") {
    Manifest m;
    std::string err;
    CHECK_FALSE(load_manifest("/nonexistent/bundle", &m, &err));
    CHECK(err.find("cannot open /nonexistent/bundle/manifest.json") != std::string::npos);
}

TEST_CASE("manifest: numbers are range-checked into their fields, never converted out of range") {
    struct Case {
        std::string from, to, expected;
    };
    const std::string good = test::kernel_json("mma", "sm_90a", "bf16", 512, 512, 512, 8, 8);
    const Case cases[] = {
        {"\"registers\": 128", "\"registers\": 1e300",
         "field 'ptxas.registers' must be an integer in -1..255 (not 1e300)"},
        {"\"spill_stores\": 0", "\"spill_stores\": 4294967296",
         "field 'ptxas.spill_stores' must be an integer in -1..1073741824 (not 4294967296)"},
        {"\"stack\": 0", "\"stack\": -1e300", "field 'ptxas.stack' must be an integer in -1..1073741824 (not -1e300)"},
        {"\"threads\": 256", "\"threads\": 256.0", "field 'threads' must be an integer in 32..1024 (not 256.0)"},
        {"\"threads\": 256", "\"threads\": 2.56e2", "field 'threads' must be an integer in 32..1024 (not 2.56e2)"},
        {"\"priority\": 0", "\"priority\": 2147483648", "field 'priority' must be an integer in 0..1048576"},
        {"\"priority\": 0", "\"priority\": 99999999999999999999999", "(not 99999999999999999999999)"},
        {"\"cubin_bytes\": 4", "\"cubin_bytes\": 1e300", "field 'cubin_bytes' must be an integer in 1..1099511627776"},
        {"\"cubin_bytes\": 4", "\"cubin_bytes\": true", "field 'cubin_bytes' must be an integer in 1..1099511627776 (not true)"},
        {"\"min\": 512", "\"min\": null", "field 'head_dim.min' must be an integer in 1..4096 (not null)"},
        {"\"tokens\": 8", "\"tokens\": \"8\"", "field 'tile.tokens' must be an integer in 1..4096 (not the string '8')"},
        {"\"keys\": 32, ", "", "field 'tile.keys' must be an integer in 1..4096 (it is missing)"},
        // Each count is in range, their sum (the kernel info's spill_bytes, an int32) is not.
        {"\"spill_stores\": 0, \"spill_loads\": 0", "\"spill_stores\": 1073741824, \"spill_loads\": 1073741824",
         "field 'ptxas.spill_stores + ptxas.spill_loads' must be at most 2147483647 bytes"},
    };
    for (const Case& c : cases) {
        std::string kernel = good;
        REQUIRE(kernel.find(c.from) != std::string::npos);
        kernel.replace(kernel.find(c.from), c.from.size(), c.to);
        Manifest m;
        std::string err;
        CAPTURE(c.to);
        CHECK_FALSE(parse_manifest(test::manifest_json({kernel}), &m, &err));
        CHECK_MESSAGE(err.find("manifest.json: kernels[0] (mma): field '") == 0, err);
        CHECK_MESSAGE(err.find(c.expected) != std::string::npos, err);
    }
    // Within range the sum is kept for the kernel info.
    std::string kernel = good;
    kernel.replace(kernel.find("\"spill_loads\": 0"), 16, "\"spill_loads\": 1073741823");
    Manifest m;
    std::string err;
    REQUIRE_MESSAGE(parse_manifest(test::manifest_json({kernel}), &m, &err), err);
    CHECK(m.kernels[0].spill_bytes == 1073741823);
}

TEST_CASE("manifest: the format must be exactly the integer 1") {
    for (const char* format : {"1e300", "-1e300", "1.0", "1.5", "2", "0", "9223372036854775808"}) {
        CAPTURE(format);
        Manifest m;
        std::string err;
        CHECK_FALSE(parse_manifest(std::string("{\"format\": ") + format + ", \"kernels\": []}", &m, &err));
        CHECK(err == std::string("manifest.json: format ") + format + " is not the supported format 1");
    }
}

TEST_CASE("manifest: duplicates are refused, not merged") {
    const std::string ref = test::kernel_json("reference_f64", "sm_90a", "f64", 32, 512, 32, 1, 64);
    Manifest m;
    std::string err;
    // A key given twice inside a kernel entry (a merging reader made the name
    // "reference_f64reference_f64").
    std::string twice = ref;
    twice.replace(0, 1, "{\"name\": \"reference_f64\", ");
    CHECK_FALSE(parse_manifest(test::manifest_json({twice}), &m, &err));
    CHECK_MESSAGE(err.find("not valid JSON (offset ") != std::string::npos, err);
    CHECK_MESSAGE(err.find("duplicate key 'name' in object") != std::string::npos, err);
    // The "kernels" array given twice (a merging reader doubled the kernels).
    const std::string doubled = "{\"format\": 1, \"kernels\": [" + ref + "], \"kernels\": [" + ref + "]}";
    CHECK_FALSE(parse_manifest(doubled, &m, &err));
    CHECK_MESSAGE(err.find("duplicate key 'kernels' in object") != std::string::npos, err);
    // Two entries for one (name, arch).
    CHECK_FALSE(parse_manifest(test::manifest_json({ref, ref}), &m, &err));
    CHECK(err == "manifest.json: kernels[1] (reference_f64): a second entry for reference_f64 on sm_90a (each (name, "
                 "arch) pair appears once)");
    // The same kernel for two archs is what a bundle has.
    CHECK(parse_manifest(
        test::manifest_json({ref, test::kernel_json("reference_f64", "sm_80", "f64", 32, 512, 32, 1, 64)}), &m, &err));
}

TEST_CASE("manifest: a manifest.json that is not a regular file is a clear error") {
    test::TempDir tmp;
    Manifest m;
    std::string err;
    const std::string as_directory = tmp.path() + "/dir-bundle";
    REQUIRE(mkdir(as_directory.c_str(), 0700) == 0);
    REQUIRE(mkdir((as_directory + "/manifest.json").c_str(), 0700) == 0);
    CHECK_FALSE(load_manifest(as_directory, &m, &err));
    CHECK(err == as_directory + "/manifest.json is a directory, not a regular file (is bundle_dir '" + as_directory +
                     "' a wideattn bundle?)");
    // A FIFO must neither block the open nor be read.
    const std::string as_fifo = tmp.path() + "/fifo-bundle";
    REQUIRE(mkdir(as_fifo.c_str(), 0700) == 0);
    REQUIRE(mkfifo((as_fifo + "/manifest.json").c_str(), 0600) == 0);
    CHECK_FALSE(load_manifest(as_fifo, &m, &err));
    CHECK(err.find("/manifest.json is a FIFO, not a regular file") != std::string::npos);
}

TEST_CASE("manifest: the fuzzing seed corpus replays: valid_* parse, invalid_* are refused, invariants hold") {
    const char* corpus = std::getenv("WIDEATTN_FUZZ_CORPUS");  // set by tests/meson.build
    REQUIRE(corpus);
    DIR* dir = opendir(corpus);
    REQUIRE_MESSAGE(dir, corpus);
    std::vector<std::string> names;
    while (const dirent* entry = readdir(dir))
        if (entry->d_name[0] != '.') names.push_back(entry->d_name);
    closedir(dir);
    std::sort(names.begin(), names.end());
    int valid = 0, invalid = 0;
    for (const std::string& name : names) {
        CAPTURE(name);
        bool accepted = false;
        const std::string problem =
            fuzz::manifest_input_problem(test::read_file(std::string(corpus) + "/" + name), &accepted);
        CHECK_MESSAGE(problem.empty(), problem);
        if (name.rfind("valid_", 0) == 0) {
            CHECK(accepted);
            ++valid;
        } else {
            CHECK(name.rfind("invalid_", 0) == 0);
            CHECK_FALSE(accepted);
            ++invalid;
        }
    }
    CHECK(valid >= 5);
    CHECK(invalid >= 15);
}
