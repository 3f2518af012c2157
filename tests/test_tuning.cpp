// test_tuning.cpp - the tuning file without a GPU: shape classes, the file's text (written, read
// back, malformed), and selection through the C API with a matching file, a file of another
// device or bundle, a malformed one, and choices the bundle cannot follow.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "dispatch/manifest.h"
#include "dispatch/tuning.h"
#include "tests/test_helpers.h"
#include "wideattn.h"

using namespace wideattn;

namespace {

constexpr int kStatusBytes = 4096;
constexpr const char* kOtherBundle = "0123456789abcdef";

// A bundle opened (REQUIREd) with whatever tuning file the environment names.
class Opened {
public:
    explicit Opened(const std::string& dir) { REQUIRE_MESSAGE(wideattn_open(&ctx_, dir.c_str()) == WIDEATTN_OK, wideattn_last_error()); }
    ~Opened() { wideattn_close(ctx_); }
    Opened(const Opened&) = delete;
    Opened& operator=(const Opened&) = delete;
    wideattn_context* ctx() const { return ctx_; }

    std::string status(int32_t* state) const {
        char text[kStatusBytes];
        REQUIRE(wideattn_tuning_status(ctx_, state, text, sizeof text, nullptr) == WIDEATTN_OK);
        return text;
    }
    std::string selected(const wideattn_prefill_params& p, int major, int minor) const {
        int32_t index = -1;
        if (wideattn_is_supported(ctx_, &p, major, minor, &index) != WIDEATTN_OK) return "";
        wideattn_kernel_info info{};
        REQUIRE(wideattn_get_kernel_info(ctx_, index, &info) == WIDEATTN_OK);
        return info.name;
    }

private:
    wideattn_context* ctx_ = nullptr;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A tuning file for the built bundle on a device of major.minor with one bf16 choice.
TuningFile one_choice(const std::string& checksum, int major, int minor, ShapeClass c, const std::string& kernel) {
    TuningFile f;
    f.device_name = "Test GPU";
    f.cc_major = major;
    f.cc_minor = minor;
    f.driver_version = 13000;
    f.bundle_checksum = checksum;
    f.library_version = wideattn_version();
    f.date = "2026-12-01T00:00:00Z";
    TuningChoice choice;
    choice.shape_class = c;
    choice.kernel = kernel;
    choice.timings.push_back({kernel, 1.5, {{"prompt_4k", 1.5}}});
    choice.timings.push_back({"other", 1.75, {{"prompt_4k", 1.75}}});
    f.choices.push_back(choice);
    return f;
}

// The built bundle copied into `tmp` (so a tuning file can sit beside it).
std::string copy_bundle(const test::TempDir& tmp) {
    const std::string target = tmp.path() + "/bundle";
    REQUIRE(std::system(("cp -r '" + test::built_bundle() + "' '" + target + "'").c_str()) == 0);
    return target;
}

// An arch of the built bundle with both mma-tier BF16 kernels, as (major, minor); false if none.
bool mma_pair_arch(int* major, int* minor) {
    Manifest m;
    std::string err;
    REQUIRE(load_manifest(test::built_bundle(), &m, &err));
    for (const ManifestKernel& k : m.kernels) {
        if (k.name != "mma_bf16_d512_pp") continue;
        *major = k.arch_major;
        *minor = k.arch_minor;
        return true;
    }
    return false;
}

// The short-prefill params of test::valid_params with `total_q` query tokens in one sequence.
wideattn_prefill_params params_with(int32_t total_q, int32_t num_seqs) {
    wideattn_prefill_params p = test::valid_params();
    p.total_q = total_q;
    p.num_seqs = num_seqs;
    return test::tensors_apart(p);
}

}  // namespace

TEST_CASE("tuning: shape classes from total_q and num_seqs") {
    // decode_single: at most one query token per sequence, an empty batch included.
    CHECK(shape_class_of(1, 1) == ShapeClass::kDecodeSingle);
    CHECK(shape_class_of(0, 1) == ShapeClass::kDecodeSingle);
    CHECK(shape_class_of(64, 64) == ShapeClass::kDecodeSingle);
    CHECK(shape_class_of(7, 8) == ShapeClass::kDecodeSingle);
    CHECK(shape_class_of(INT32_MAX, INT32_MAX) == ShapeClass::kDecodeSingle);
    // decode: num_seqs < total_q <= 8 * num_seqs.
    CHECK(shape_class_of(2, 1) == ShapeClass::kDecode);
    CHECK(shape_class_of(65, 64) == ShapeClass::kDecode);
    CHECK(shape_class_of(8, 1) == ShapeClass::kDecode);
    CHECK(shape_class_of(64, 8) == ShapeClass::kDecode);
    CHECK(shape_class_of(INT32_MAX, INT32_MAX / 2) == ShapeClass::kDecode);
    CHECK(shape_class_of(9, 1) == ShapeClass::kPrefillShort);
    CHECK(shape_class_of(65, 8) == ShapeClass::kPrefillShort);
    CHECK(shape_class_of(8191, 1) == ShapeClass::kPrefillShort);
    CHECK(shape_class_of(8192, 1) == ShapeClass::kPrefillLong);
    CHECK(shape_class_list() == "decode_single, decode, prefill_short, prefill_long");
    ShapeClass c;
    for (const ShapeClass each : kShapeClasses) {
        REQUIRE(shape_class_from_name(shape_class_name(each), &c));
        CHECK(c == each);
    }
    CHECK_FALSE(shape_class_from_name("prefill_medium", &c));
}

TEST_CASE("tuning: the file's text reads back as written") {
    TuningFile f = one_choice("00112233aabbccdd", 12, 0, ShapeClass::kPrefillLong, "mma_bf16_d512");
    f.choices.push_back(f.choices[0]);
    f.choices[1].shape_class = ShapeClass::kDecodeSingle;
    TuningFile back;
    std::string err;
    REQUIRE_MESSAGE(parse_tuning(tuning_json(f), &back, &err), err);
    CHECK(back.device_name == "Test GPU");
    CHECK(back.cc_major == 12);
    CHECK(back.cc_minor == 0);
    CHECK(back.driver_version == 13000);
    CHECK(back.bundle_checksum == "00112233aabbccdd");
    REQUIRE(back.choices.size() == 2);
    CHECK(back.choices[0].shape_class == ShapeClass::kPrefillLong);
    CHECK(back.choices[1].shape_class == ShapeClass::kDecodeSingle);
    CHECK(contains(tuning_json(f), "\"class\": \"decode_single\""));
    CHECK(back.choices[0].kernel == "mma_bf16_d512");
    REQUIRE(back.choices[0].timings.size() == 2);
    CHECK(back.choices[0].timings[1].kernel == "other");
    CHECK(back.choices[0].timings[1].total_ms == doctest::Approx(1.75));
    REQUIRE(back.choices[0].timings[0].case_ms.size() == 1);
    CHECK(back.choices[0].timings[0].case_ms[0].first == "prompt_4k");
}

TEST_CASE("tuning: a malformed file is refused with the field named") {
    const std::string good = tuning_json(one_choice("00112233aabbccdd", 9, 0, ShapeClass::kDecode, "mma_bf16_d512"));
    auto replace = [&](const std::string& from, const std::string& to) {
        std::string text = good;
        const size_t at = text.find(from);
        REQUIRE_MESSAGE(at != std::string::npos, from);
        return text.replace(at, from.size(), to);
    };
    struct Case {
        std::string text, expected;
    };
    const std::vector<Case> cases = {
        {good.substr(0, good.size() / 2), "offset"},
        {"[1, 2]", "'(top level)' must be an object"},
        {replace("\"format\": 1", "\"format\": 2"), "'format' must be 1"},
        {replace("\"name\": \"Test GPU\", ", ""), "'device.name' must be a string"},
        {replace("\"cc_major\": 9", "\"cc_major\": 9.5"), "'device.cc_major' must be an integer"},
        // Integers are integer literals within range: never a double converted out of range.
        {replace("\"cc_major\": 9", "\"cc_major\": 9.0"), "'device.cc_major' must be an integer in 1..100"},
        {replace("\"cc_major\": 9", "\"cc_major\": 1e300"), "'device.cc_major' must be an integer in 1..100"},
        {replace("\"format\": 1", "\"format\": 1e300"), "'format' must be 1"},
        {replace("\"format\": 1", "\"format\": 1, \"format\": 1"), "duplicate key 'format'"},
        {replace("00112233aabbccdd", "not-a-checksum"), "'bundle_checksum' must be 16 lower-case hex digits"},
        // An unknown class is malformed (format 1 readers before decode_single refuse that name so).
        {replace("\"decode\"", "\"prefill_medium\""),
         "'choices[0].class' must be one of decode_single, decode, prefill_short, prefill_long"},
        {replace("\"q_dtype\": \"bf16\"", "\"q_dtype\": \"int4\""), "'choices[0].q_dtype' must be a dtype name"},
        {replace("\"kernel\": \"mma_bf16_d512\",\n", "\"kernel\": 7,\n"),
         "'choices[0].kernel' must be a string"},
        {replace("\"total_ms\": 1.5", "\"total_ms\": -1"), "'choices[0].timings[0].total_ms' must be a number"},
        {replace("\"median_ms\": 1.5", "\"median_ms\": \"fast\""), "'choices[0].timings[0].cases[0].median_ms'"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.text);
        TuningFile f;
        std::string err;
        CHECK_FALSE(parse_tuning(c.text, &f, &err));
        CHECK_MESSAGE(contains(err, c.expected), err);
    }
    // The same class and dtypes twice.
    TuningFile twice = one_choice("00112233aabbccdd", 9, 0, ShapeClass::kDecode, "mma_bf16_d512");
    twice.choices.push_back(twice.choices[0]);
    TuningFile f;
    std::string err;
    CHECK_FALSE(parse_tuning(tuning_json(twice), &f, &err));
    CHECK(contains(err, "'choices[1]' must be the only choice for decode bf16/bf16"));

    // Through wideattn_open: WIDEATTN_ERROR_BUNDLE naming the file and the field.
    test::TempDir tmp;
    const std::string bundle = copy_bundle(tmp);
    test::write_file(bundle + "/tuning.json", replace("\"format\": 1", "\"format\": 2"));
    const test::ScopedEnv env(kTuningPathEnv, nullptr);
    wideattn_context* ctx = nullptr;
    CHECK(wideattn_open(&ctx, bundle.c_str()) == WIDEATTN_ERROR_BUNDLE);
    CHECK(ctx == nullptr);
    CHECK(contains(wideattn_last_error(), "tuning file " + bundle + "/tuning.json is malformed"));
    CHECK(contains(wideattn_last_error(), "'format' must be 1"));
}

TEST_CASE("tuning: no file, a missing named file, and WIDEATTN_TUNING=off") {
    test::TempDir tmp;
    const std::string bundle = copy_bundle(tmp);
    int32_t state = -1;
    {
        const test::ScopedEnv env(kTuningPathEnv, nullptr);
        const Opened opened(bundle);
        CHECK(contains(opened.status(&state), "no tuning file at " + bundle + "/tuning.json"));
        CHECK(state == WIDEATTN_TUNING_NONE);
        CHECK(std::string(wideattn_tuning_path(opened.ctx())) == bundle + "/tuning.json");
        CHECK(std::string(wideattn_bundle_checksum(opened.ctx())) ==
              bundle_checksum(test::read_file(bundle + "/manifest.json")));
    }
    {
        const std::string missing = tmp.path() + "/absent.json";
        const test::ScopedEnv env(kTuningPathEnv, missing.c_str());
        wideattn_context* ctx = nullptr;
        CHECK(wideattn_open(&ctx, bundle.c_str()) == WIDEATTN_ERROR_BUNDLE);
        CHECK(contains(wideattn_last_error(), "cannot read the tuning file " + missing + " (named by WIDEATTN_TUNING)"));
    }
    {
        // A directory in place of tuning.json: an error naming it, not a stream exception.
        REQUIRE(mkdir((bundle + "/tuning.json").c_str(), 0700) == 0);
        const test::ScopedEnv env(kTuningPathEnv, nullptr);
        wideattn_context* ctx = nullptr;
        CHECK(wideattn_open(&ctx, bundle.c_str()) == WIDEATTN_ERROR_BUNDLE);
        CHECK(std::string(wideattn_last_error()) == "cannot read the tuning file " + bundle + "/tuning.json: " + bundle +
                                                        "/tuning.json is a directory, not a regular file");
        REQUIRE(rmdir((bundle + "/tuning.json").c_str()) == 0);
    }
    {
        // A file beside the bundle is not read when tuning files are off.
        test::write_file(bundle + "/tuning.json", "not json");
        const test::ScopedEnv env(kTuningPathEnv, kTuningOff);
        const Opened opened(bundle);
        CHECK(contains(opened.status(&state), "tuning files are off"));
        CHECK(state == WIDEATTN_TUNING_NONE);
    }
}

TEST_CASE("tuning: status arguments") {
    const test::ScopedEnv env(kTuningPathEnv, kTuningOff);
    const Opened opened(test::built_bundle());
    int32_t state = -1;
    size_t length = 0;
    CHECK(wideattn_tuning_status(nullptr, &state, nullptr, 0, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(wideattn_tuning_status(opened.ctx(), nullptr, nullptr, 0, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(wideattn_tuning_status(opened.ctx(), &state, nullptr, 5, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(contains(wideattn_last_error(), "message_size=5"));
    REQUIRE(wideattn_tuning_status(opened.ctx(), &state, nullptr, 0, &length) == WIDEATTN_OK);
    CHECK(length > 8);
    char cut[8];
    REQUIRE(wideattn_tuning_status(opened.ctx(), &state, cut, sizeof cut, &length) == WIDEATTN_OK);
    CHECK(std::string(cut) == "tuning ");
}

TEST_CASE("tuning: selection follows a matching file, and ignores a stale or unfit one with a reason") {
    int major = 0, minor = 0;
    if (!mma_pair_arch(&major, &minor)) {
        MESSAGE("the built bundle has no mma_bf16_d512_pp cubin");
        return;
    }
    test::TempDir tmp;
    const std::string bundle = copy_bundle(tmp);
    const std::string file = tmp.path() + "/tuning.json";
    const test::ScopedEnv env(kTuningPathEnv, file.c_str());
    const std::string checksum = bundle_checksum(test::read_file(bundle + "/manifest.json"));
    const wideattn_prefill_params short_prefill = params_with(100, 2), long_prefill = params_with(9000, 1),
                                  single = params_with(2, 2), verify = params_with(10, 2);
    // The default on that arch, and the mma-tier BF16 kernel it would not pick; single-token calls
    // have a default of their own where a single_token kernel outranks it (decode_bf16w4_d512 on
    // sm_90), and so may one long sequence where a many_tokens kernel does (wgmma_bf16c2p_d512).
    std::string automatic, automatic_single, automatic_long;
    {
        const test::ScopedEnv off(kTuningPathEnv, kTuningOff);
        automatic = Opened(bundle).selected(short_prefill, major, minor);
        automatic_single = Opened(bundle).selected(single, major, minor);
        automatic_long = Opened(bundle).selected(long_prefill, major, minor);
    }
    const std::string other = automatic == "mma_bf16_d512_pp" ? "mma_bf16_d512" : "mma_bf16_d512_pp";
    int32_t state = -1;

    SUBCASE("matching: the named kernel for its class, the priority order for the others") {
        test::write_file(file, tuning_json(one_choice(checksum, major, minor, ShapeClass::kPrefillShort, other)));
        const Opened opened(bundle);
        CHECK(contains(opened.status(&state), "no device compared yet"));
        CHECK(state == WIDEATTN_TUNING_READ);
        CHECK(opened.selected(short_prefill, major, minor) == other);
        CHECK(opened.status(&state).find("followed on Test GPU") != std::string::npos);
        CHECK(state == WIDEATTN_TUNING_ACTIVE);
        CHECK(opened.selected(long_prefill, major, minor) == automatic_long);
        CHECK(opened.selected(single, major, minor) == automatic_single);
        CHECK(opened.selected(verify, major, minor) == automatic);
        // Other dtypes are not this choice's.
        wideattn_prefill_params reference = short_prefill;
        reference.o_dtype = WIDEATTN_DTYPE_F64;
        CHECK(opened.selected(reference, major, minor) == "reference_f64");
        // Pinning wins over the file.
        REQUIRE(wideattn_set_prefill_kernel(opened.ctx(), automatic.c_str()) == WIDEATTN_OK);
        CHECK(opened.selected(short_prefill, major, minor) == automatic);
    }
    SUBCASE("decode (a file of before decode_single too) serves multi-token decode, decode_single one token a sequence") {
        TuningFile f = one_choice(checksum, major, minor, ShapeClass::kDecode, other);
        {
            test::write_file(file, tuning_json(f));
            const Opened opened(bundle);
            CHECK(opened.selected(verify, major, minor) == other);
            CHECK(opened.selected(single, major, minor) == automatic_single);
            CHECK(opened.selected(params_with(3, 2), major, minor) == other);
            CHECK(opened.selected(params_with(0, 2), major, minor) == automatic_single);
        }
        f.choices[0].shape_class = ShapeClass::kDecodeSingle;
        test::write_file(file, tuning_json(f));
        const Opened opened(bundle);
        CHECK(opened.selected(single, major, minor) == other);
        CHECK(opened.selected(params_with(0, 2), major, minor) == other);
        CHECK(opened.selected(verify, major, minor) == automatic);
        CHECK(opened.selected(params_with(3, 2), major, minor) == automatic);
    }
    SUBCASE("stale device: another compute capability") {
        test::write_file(file, tuning_json(one_choice(checksum, major + 1, minor, ShapeClass::kPrefillShort, other)));
        const Opened opened(bundle);
        CHECK(opened.selected(short_prefill, major, minor) == automatic);
        const std::string why = opened.status(&state);
        CHECK(state == WIDEATTN_TUNING_IGNORED);
        CHECK_MESSAGE(contains(why, "ignored: it was written on Test GPU (sm_" + std::to_string(major + 1)), why);
    }
    SUBCASE("stale bundle: another checksum") {
        test::write_file(file, tuning_json(one_choice(kOtherBundle, major, minor, ShapeClass::kPrefillShort, other)));
        const Opened opened(bundle);
        CHECK(opened.selected(short_prefill, major, minor) == automatic);
        const std::string why = opened.status(&state);
        CHECK(state == WIDEATTN_TUNING_IGNORED);
        CHECK_MESSAGE(contains(why, std::string("written for bundle ") + kOtherBundle + ", this bundle is " + checksum),
                      why);
    }
    SUBCASE("a kernel the bundle lacks, or one of other dtypes: left out with the reason") {
        TuningFile f = one_choice(checksum, major, minor, ShapeClass::kPrefillShort, "no_such_kernel");
        TuningChoice wrong_dtypes = f.choices[0];
        wrong_dtypes.shape_class = ShapeClass::kPrefillLong;
        wrong_dtypes.kernel = "reference_f64";
        wrong_dtypes.q_dtype = WIDEATTN_DTYPE_E4M3;
        f.choices.push_back(wrong_dtypes);
        test::write_file(file, tuning_json(f));
        const Opened opened(bundle);
        CHECK(opened.selected(short_prefill, major, minor) == automatic);
        CHECK(opened.selected(long_prefill, major, minor) == automatic_long);
        const std::string why = opened.status(&state);
        CHECK_MESSAGE(contains(why, "prefill_short bf16/bf16 names no_such_kernel, which is not a prefill kernel of "
                                    "the bundle: left out"),
                      why);
        CHECK_MESSAGE(contains(why, "prefill_long e4m3/bf16 names reference_f64, which does not take these dtypes"), why);
    }
    SUBCASE("a kernel that cannot serve the call: the priority order") {
        // The fp64 reference takes bf16 Q/K/V but writes f64, so it never serves a bf16-output call.
        test::write_file(file, tuning_json(one_choice(checksum, major, minor, ShapeClass::kPrefillShort, "reference_f64")));
        const Opened opened(bundle);
        CHECK(opened.selected(short_prefill, major, minor) == automatic);
    }
    SUBCASE("the file beside the bundle when WIDEATTN_TUNING is unset") {
        const test::ScopedEnv unset(kTuningPathEnv, nullptr);
        test::write_file(bundle + "/tuning.json",
                         tuning_json(one_choice(checksum, major, minor, ShapeClass::kPrefillShort, other)));
        const Opened opened(bundle);
        CHECK(opened.selected(short_prefill, major, minor) == other);
        CHECK(contains(opened.status(&state), "tuning file " + bundle + "/tuning.json"));
    }
}

TEST_CASE("tuning: a decode choice never displaces a single_token kernel on single-token calls") {
    // decode_e4m3_d512 (single_token) ranks first for bf16 Q over an e4m3 cache where it fits; a file
    // naming the prefill kernel for decode (as one written before decode_single would) keeps it there.
    Manifest m;
    std::string err;
    REQUIRE(load_manifest(test::built_bundle(), &m, &err));
    const auto arch_of = [&](const std::string& name, int* major, int* minor) {
        for (const ManifestKernel& k : m.kernels)
            if (k.name == name) {
                *major = k.arch_major;
                *minor = k.arch_minor;
                return true;
            }
        return false;
    };
    int major = 0, minor = 0, other_major = 0, other_minor = 0;
    if (!arch_of("decode_e4m3_d512", &major, &minor) || !arch_of("wgmma_e4m3kv_d512", &other_major, &other_minor) ||
        other_major != major || other_minor != minor) {
        MESSAGE("the built bundle has no decode_e4m3_d512 beside wgmma_e4m3kv_d512");
        return;
    }
    test::TempDir tmp;
    const std::string bundle = copy_bundle(tmp);
    const std::string file = tmp.path() + "/tuning.json";
    const test::ScopedEnv env(kTuningPathEnv, file.c_str());
    const auto e4m3_kv = [](int32_t total_q, int32_t num_seqs) {
        wideattn_prefill_params p = params_with(total_q, num_seqs);
        p.kv_dtype = WIDEATTN_DTYPE_E4M3;
        p.k_scale = static_cast<const float*>(test::far_window(10));
        p.v_scale = static_cast<const float*>(test::far_window(11));
        return p;
    };
    TuningFile f = one_choice(bundle_checksum(test::read_file(bundle + "/manifest.json")), major, minor,
                              ShapeClass::kDecode, "wgmma_e4m3kv_d512");
    f.choices[0].kv_dtype = WIDEATTN_DTYPE_E4M3;
    test::write_file(file, tuning_json(f));
    {
        const Opened opened(bundle);
        CHECK(opened.selected(e4m3_kv(2, 2), major, minor) == "decode_e4m3_d512");
        CHECK(opened.selected(e4m3_kv(10, 2), major, minor) == "wgmma_e4m3kv_d512");
    }
    // A decode_single choice is the file's measured word for those calls, whatever the priorities.
    f.choices[0].shape_class = ShapeClass::kDecodeSingle;
    test::write_file(file, tuning_json(f));
    const Opened opened(bundle);
    CHECK(opened.selected(e4m3_kv(2, 2), major, minor) == "wgmma_e4m3kv_d512");
}
