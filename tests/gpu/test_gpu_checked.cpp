// test_gpu_checked.cpp - checked mode (WIDEATTN_FLAG_CHECK_METADATA) on a GPU: the metadata is
// copied from device memory on the caller's stream; a good call's output is bit-identical to the
// unchecked call's; a bad block_table entry or seq_lens_k is refused with its message and nothing
// is launched (the poisoned output stays poisoned); WIDEATTN_CHECK_METADATA=1 checks a context's
// every call.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "dispatch/metadata_check.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/test_helpers.h"

using namespace wideattn;
using wideattn::test::gpu;

namespace {

constexpr uint64_t kSeed = 20261201;

// A two-sequence fp64 problem (q_len 4 over 24 keys, q_len 9 over 9 keys; pages of 16) on the GPU.
struct CheckedProblem {
    HostProblem host;
    DeviceProblem device;
    CheckedProblem() {
        REQUIRE(make_problem(problem_spec({4, 9}, {20, 0}, 8, 1, 16, kSeed), &host).empty());
        const std::string err = device.create(*gpu().device, host, WIDEATTN_DTYPE_F64);
        REQUIRE_MESSAGE(err.empty(), err);
    }
    void upload(DeviceBuffer& buffer, const std::vector<int32_t>& values) {
        const std::string err = buffer.upload(values.data(), values.size() * sizeof(int32_t));
        REQUIRE_MESSAGE(err.empty(), err);
    }
    // Whether o still holds only the poison bytes (no kernel wrote it).
    bool output_untouched() const {
        REQUIRE(gpu().device->check(gpu().device->driver().cuCtxSynchronize(), "cuCtxSynchronize").empty());
        std::vector<unsigned char> raw;
        REQUIRE(device.download_raw(&raw).empty());
        for (unsigned char byte : raw)
            if (byte != kPoisonByte) return false;
        return true;
    }
};

std::string last_error() { return wideattn_last_error(); }

}  // namespace

TEST_CASE("gpu checked mode: good calls run unchanged, bad metadata launches nothing") {
    CheckedProblem p;
    REQUIRE(p.device.run(*gpu().device, gpu().ctx).empty());
    std::vector<unsigned char> unchecked, checked;
    REQUIRE(p.device.download_raw(&unchecked).empty());
    p.device.params.flags = WIDEATTN_FLAG_CHECK_METADATA;
    const std::string err = p.device.run(*gpu().device, gpu().ctx);
    REQUIRE_MESSAGE(err.empty(), err);
    REQUIRE(p.device.download_raw(&checked).empty());
    CHECK(checked == unchecked);

    std::vector<int32_t> table = p.host.block_table;
    table[static_cast<size_t>(p.host.table_stride) + 0] = p.host.num_blocks;  // sequence 1's only page
    p.upload(p.device.block_table, table);
    REQUIRE(p.device.poison_outputs().empty());
    CHECK(wideattn_prefill(gpu().ctx, &p.device.params, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    const std::string n = std::to_string(p.host.num_blocks);
    CHECK(last_error() ==
          "block_table[1][0] = " + n + " (sequence 1, key block 0) is outside [0, num_blocks = " + n + ") (checked mode)");
    CHECK(p.output_untouched());

    p.upload(p.device.block_table, p.host.block_table);
    std::vector<int32_t> lengths = p.host.seq_lens_k;
    lengths[0] = 3;  // below its 4 new tokens
    p.upload(p.device.seq_lens_k, lengths);
    CHECK(wideattn_prefill(gpu().ctx, &p.device.params, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error().find("seq_lens_k[0] = 3 is below q_len = 4 of sequence 0") == 0);
    CHECK(p.output_untouched());

    p.upload(p.device.seq_lens_k, p.host.seq_lens_k);
    CHECK(p.device.run(*gpu().device, gpu().ctx).empty());
}

TEST_CASE("gpu checked mode: WIDEATTN_CHECK_METADATA=1 checks every call of a context opened with it") {
    CheckedProblem p;
    std::vector<int32_t> table = p.host.block_table;
    table[1] = -1;  // sequence 0's second page
    p.upload(p.device.block_table, table);
    wideattn_context* checked = nullptr;
    wideattn_status opened;
    {
        const test::ScopedEnv env(kCheckMetadataEnv, "1");
        opened = wideattn_open(&checked, nullptr);
    }
    REQUIRE_MESSAGE(opened == WIDEATTN_OK, last_error());
    REQUIRE(p.device.poison_outputs().empty());
    CHECK(wideattn_prefill(checked, &p.device.params, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(last_error().find("block_table[0][1] = -1 (sequence 0, key block 1) is outside [0, num_blocks = ") == 0);
    CHECK(p.output_untouched());
    wideattn_close(checked);
}
