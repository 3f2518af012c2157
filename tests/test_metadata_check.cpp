// test_metadata_check.cpp - checked mode on the CPU: each rule over host arrays
// (dispatch/metadata_check.h) with its message, the WIDEATTN_CHECK_METADATA values, and the
// flags field through the driver-free entry points (wideattn_is_supported, wideattn_plan_launch),
// which validate it and read no device memory. The driver copies are tested through the fake
// driver (tests/test_checked_mode.cpp).
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "dispatch/metadata_check.h"
#include "tests/test_helpers.h"
#include "wideattn.h"

using namespace wideattn;

namespace {

constexpr int32_t kTableStride = 8;  // block_table row length of the fixture
constexpr int32_t kNumBlocks = 64;
constexpr int32_t kH200Sms = 132;

// Host metadata of three sequences (q_len 3, 0, 5; 19, 7, 80 keys of page 16) in valid params.
struct HostCall {
    wideattn_prefill_params p = test::valid_params();
    std::vector<int32_t> cu_seqlens_q{0, 3, 3, 8};
    std::vector<int32_t> seq_lens_k{19, 7, 80};
    std::vector<int32_t> block_table;

    HostCall() : block_table(3 * kTableStride, -1) {  // unused entries are garbage: never checked
        p.num_seqs = 3;
        p.total_q = 8;
        p.block_table_stride = kTableStride;
        p.num_blocks = kNumBlocks;
        for (int32_t s = 0; s < 3; ++s)
            for (int64_t j = 0; j < used_blocks(p, seq_lens_k[s]); ++j) block_table[s * kTableStride + j] = s * 10 + j;
    }
    wideattn_status check(std::string* message) const {
        return check_host_metadata(p, cu_seqlens_q.data(), seq_lens_k.data(), block_table.data(), message);
    }
};

}  // namespace

TEST_CASE("metadata check: valid host metadata passes, garbage past the used prefixes is ignored") {
    const HostCall call;
    std::string message;
    CHECK_MESSAGE(call.check(&message) == WIDEATTN_OK, message);
    CHECK(used_blocks(call.p, 0) == 0);
    CHECK(used_blocks(call.p, 1) == 1);
    CHECK(used_blocks(call.p, 16) == 1);
    CHECK(used_blocks(call.p, 17) == 2);
    CHECK(used_blocks(call.p, INT32_MAX) == (int64_t{INT32_MAX} + 15) / 16);
}

TEST_CASE("metadata check: each rule names the first bad entry, its value and the rule") {
    HostCall call;
    std::string expected;
    SUBCASE("cu_seqlens_q[0] not 0") {
        call.cu_seqlens_q[0] = 1;
        expected = "cu_seqlens_q[0] = 1 is not 0 (the first sequence starts at query row 0; checked mode)";
    }
    SUBCASE("cu_seqlens_q decreasing") {
        call.cu_seqlens_q[2] = 2;
        expected = "cu_seqlens_q[2] = 2 is below cu_seqlens_q[1] = 3 (must be non-decreasing; checked mode)";
    }
    SUBCASE("cu_seqlens_q above total_q") {
        call.cu_seqlens_q[1] = 9;
        expected = "cu_seqlens_q[1] = 9 is above total_q = 8 (no sequence ends past the last query row; checked mode)";
    }
    SUBCASE("cu_seqlens_q ends before total_q") {
        call.cu_seqlens_q[3] = 7;
        expected = "cu_seqlens_q[3] = 7 is not total_q = 8 (cu_seqlens_q[num_seqs] must equal total_q; checked mode)";
    }
    SUBCASE("seq_lens_k below q_len") {
        call.seq_lens_k[2] = 4;
        expected = "seq_lens_k[2] = 4 is below q_len = 5 of sequence 2 (cu_seqlens_q[3] - cu_seqlens_q[2]; its keys "
                   "include its new tokens; checked mode)";
    }
    SUBCASE("seq_lens_k negative") {
        call.seq_lens_k[1] = -1;
        expected = "seq_lens_k[1] = -1 is below q_len = 0 of sequence 1";
    }
    SUBCASE("seq_lens_k past the table row") {
        call.seq_lens_k[0] = kTableStride * 16 + 1;
        expected = "seq_lens_k[0] = 129 is above block_table_stride * block_size = 128 (the keys one block_table row "
                   "addresses; checked mode)";
    }
    SUBCASE("block_table entry negative") {
        call.block_table[2 * kTableStride + 4] = -1;
        expected = "block_table[2][4] = -1 (sequence 2, key block 4) is outside [0, num_blocks = 64) (checked mode)";
    }
    SUBCASE("block_table entry num_blocks, in the last used block") {
        call.block_table[0 * kTableStride + 1] = kNumBlocks;
        expected = "block_table[0][1] = 64 (sequence 0, key block 1) is outside [0, num_blocks = 64) (checked mode)";
    }
    SUBCASE("the first of two bad entries is reported") {
        call.block_table[1 * kTableStride + 0] = 1000;
        call.block_table[2 * kTableStride + 0] = -5;
        expected = "block_table[1][0] = 1000 (sequence 1, key block 0)";
    }
    std::string message;
    CHECK(call.check(&message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK_MESSAGE(message.find(expected) == 0, message);
}

TEST_CASE("metadata check: the row capacity of a huge stride does not overflow") {
    HostCall call;
    call.p.num_seqs = 1;
    call.p.total_q = 3;
    call.cu_seqlens_q = {0, 3};
    call.seq_lens_k = {INT32_MAX};
    call.p.block_table_stride = INT64_MAX / 8;  // stride * block_size is past int64
    std::string message;
    CHECK(check_sequence_lengths(call.p, call.cu_seqlens_q.data(), call.seq_lens_k.data(), &message) == WIDEATTN_OK);
}

TEST_CASE("metadata check: a piece of a row is checked at its own key block indices") {
    const HostCall call;
    const std::vector<int32_t> entries{5, 6, kNumBlocks + 3};
    std::string message;
    CHECK(check_block_entries(call.p, 1, 1000, entries.data(), 2, &message) == WIDEATTN_OK);
    CHECK(check_block_entries(call.p, 1, 1000, entries.data(), 3, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "block_table[1][1002] = 67 (sequence 1, key block 1002) is outside [0, num_blocks = 64) "
                     "(checked mode)");
}

TEST_CASE("metadata check: WIDEATTN_CHECK_METADATA values") {
    bool on = true;
    std::string message;
    CHECK(parse_check_metadata_env(nullptr, &on, &message));
    CHECK_FALSE(on);
    CHECK(parse_check_metadata_env("", &on, &message));
    CHECK_FALSE(on);
    CHECK(parse_check_metadata_env("0", &on, &message));
    CHECK_FALSE(on);
    CHECK(parse_check_metadata_env("1", &on, &message));
    CHECK(on);
    for (const char* bad : {"yes", "2", " 1", "true", "01"}) {
        CHECK_FALSE(parse_check_metadata_env(bad, &on, &message));
        CHECK(message == std::string("WIDEATTN_CHECK_METADATA=") + bad +
                             " is not 0 or 1 (1 puts every prefill of the context in checked mode; unset, empty or 0 "
                             "leaves it to each call's flags)");
    }
    wideattn_prefill_params p = test::valid_params();
    CHECK_FALSE(checked_mode(p, false));
    CHECK(checked_mode(p, true));
    p.flags = WIDEATTN_FLAG_CHECK_METADATA;
    CHECK(checked_mode(p, false));
}

TEST_CASE("metadata check: wideattn_open refuses a bad WIDEATTN_CHECK_METADATA, naming it") {
    wideattn_context* ctx = nullptr;
    {
        const test::ScopedEnv env(kCheckMetadataEnv, "on");
        CHECK(wideattn_open(&ctx, test::built_bundle().c_str()) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        CHECK(ctx == nullptr);
        CHECK(std::string(wideattn_last_error()).find("WIDEATTN_CHECK_METADATA=on is not 0 or 1") == 0);
    }
    for (const char* good : {"1", "0", ""}) {
        const test::ScopedEnv env(kCheckMetadataEnv, good);
        REQUIRE_MESSAGE(wideattn_open(&ctx, test::built_bundle().c_str()) == WIDEATTN_OK, wideattn_last_error());
        wideattn_close(ctx);
    }
}

TEST_CASE("metadata check: the driver-free entry points validate the flags and read no metadata") {
    wideattn_context* ctx = nullptr;
    const test::ScopedEnv env(kCheckMetadataEnv, "1");  // a checked context: still no device read
    REQUIRE(wideattn_open(&ctx, test::built_bundle().c_str()) == WIDEATTN_OK);
    wideattn_prefill_params p = test::valid_params();  // fake metadata pointers: a read would crash
    p.o_dtype = WIDEATTN_DTYPE_F64;
    p.flags = WIDEATTN_FLAG_CHECK_METADATA;
    int32_t index = -1;
    CHECK_MESSAGE(wideattn_is_supported(ctx, &p, 9, 0, &index) == WIDEATTN_OK, wideattn_last_error());
    wideattn_launch_plan plan{};
    CHECK_MESSAGE(wideattn_plan_launch(ctx, &p, 9, 0, kH200Sms, &plan) == WIDEATTN_OK, wideattn_last_error());
    p.flags = 8;
    CHECK(wideattn_is_supported(ctx, &p, 9, 0, &index) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) ==
          "flags=8 has unknown bits 0x8 (the flags are WIDEATTN_FLAG_CHECK_METADATA = 1, "
          "WIDEATTN_FLAG_V_TRANSPOSED = 2 and WIDEATTN_FLAG_K_FROM_V = 4)");
    CHECK(wideattn_plan_launch(ctx, &p, 9, 0, kH200Sms, &plan) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()).find("flags=8 has unknown bits 0x8") == 0);
    wideattn_close(ctx);
}
