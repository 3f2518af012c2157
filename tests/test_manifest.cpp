// test_manifest.cpp - manifest generation (the built bundle) and parsing (every field checked,
// clear errors naming the kernel and field).
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "dispatch/manifest.h"
#include "dispatch/manifest_format.h"
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
    std::set<std::string> reference_archs, quantize_archs, amax_archs, mma_archs, ping_pong_archs;
    for (const ManifestKernel& k : m.kernels) {
        CHECK(k.cubin_bytes > 0);
        CHECK(k.registers > 0);
        CHECK(k.registers <= 255);
        // The one exception of the kernel table ('spills_allowed_sm', bundle/meson.build): the e4m3-Q
        // kernel on sm_90.
        const bool spills_allowed = k.name == "mma_e4m3q_d512" && (k.arch == "sm_90" || k.arch == "sm_90a");
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
        } else if (k.name == "amax_e4m3") {
            amax_archs.insert(k.arch);
            CHECK(k.kind == "amax_e4m3");
            CHECK(k.q_dtype == WIDEATTN_DTYPE_BF16);
            CHECK(k.o_dtype == WIDEATTN_DTYPE_F32);
            CHECK(k.tile_tokens > 0);
        } else {
            CHECK(k.kind == "prefill");
        }
        if (k.name == "reference_f64") {
            reference_archs.insert(k.arch);
            CHECK(k.o_dtype == 3);
            CHECK(k.symbol == "wideattn_reference_f64");
            CHECK(k.has_feature("lse"));
            CHECK(k.head_dim_max == 512);
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
    // of its dtypes; the mma-tier BF16 kernel without ping-pong outranks the one with everywhere but
    // on sm_120a, where ping-pong (the published design) comes first.
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
        CHECK(amax_archs.count(arch) == 1);
        CHECK(mma_archs.count(arch) == 1);
        CHECK(ping_pong_archs.count(arch) == 1);
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
    for (const char* bad : {"", "sm_", "sm_9", "compute_90", "sm_9x", "sm_1200"}) CHECK_FALSE(parse_arch(bad, &major, &minor, &specific));
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
         "field 'kind' must be \"prefill\", \"quantize_e4m3\" or \"amax_e4m3\""},
        {replace("\"threads\": 256", "\"threads\": 4096"), "field 'threads' must be an integer in 32..1024"},
        {replace("\"threads\": 256", "\"threads\": 2.5"), "field 'threads'"},
        {replace("\"cubin\": \"mma.sm_90a.cubin\"", "\"cubin\": \"../etc/passwd\""), "field 'cubin'"},
        {replace("\"symbol\": \"wideattn_mma\", ", ""), "field 'symbol' must be a string"},
        {replace("\"registers\": 128", "\"registers\": 300"), "field 'ptxas.registers'"},
        {replace("\"min\": 8, \"max\": 8", "\"min\": 9, \"max\": 8"), "min <= max"},
        {replace("\"features\": [\"varlen\", \"paged\", \"lse\"]", "\"features\": [1]"), "field 'features'"},
        {replace("\"priority\": 0, ", ""), "kernels[0] (mma): field 'priority' must be an integer in 0..1048576"},
        {replace("\"priority\": 0", "\"priority\": -1"), "field 'priority' must be an integer"},
        {replace("\"priority\": 0", "\"priority\": \"high\""), "field 'priority' must be an integer"},
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
