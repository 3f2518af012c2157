// test_validation.cpp - every bad argument gets its own case and a message naming the
// argument and its value; wideattn_is_supported and wideattn_prefill validate identically.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "dispatch/validation.h"
#include "tests/test_helpers.h"

using namespace wideattn;

namespace {

// One bad argument: how to break valid params, and the text the refusal must carry.
template <typename Params>
struct BadCase {
    const char* label;
    std::function<void(Params&)> mutate;
    const char* expected;
};

template <typename Params>
using Validator = wideattn_status (*)(const Params*, std::string*);

// How a refusal's message must carry the expected text.
enum class MessageMatch { kContains, kStartsWith };

// The refusal message of `validate` on p; where it does not refuse with INVALID_ARGUMENT, a
// line naming the status it returned instead (which no expected text matches).
template <typename Params>
std::string refusal(Validator<Params> validate, const Params& p) {
    std::string message;
    const wideattn_status status = validate(&p, &message);
    if (status == WIDEATTN_ERROR_INVALID_ARGUMENT) return message;
    return std::string("<not refused as INVALID_ARGUMENT: ") + wideattn_status_string(status) + "> " + message;
}

// Each case applied alone to `valid()`: refused as INVALID_ARGUMENT with its expected text.
template <typename Params>
void check_each_refused(const std::vector<BadCase<Params>>& cases, Params (*valid)(), Validator<Params> validate,
                        MessageMatch match) {
    for (const BadCase<Params>& c : cases) {
        Params p = valid();
        c.mutate(p);
        const std::string label = c.label;  // captured as text, not as a pointer
        CAPTURE(label);
        const std::string message = refusal(validate, p);
        const bool carried = match == MessageMatch::kStartsWith ? message.rfind(c.expected, 0) == 0
                                                                : message.find(c.expected) != std::string::npos;
        CHECK_MESSAGE(carried, message);
    }
}

void* fake(uintptr_t address) { return reinterpret_cast<void*>(address); }

}  // namespace

TEST_CASE("validation: the baseline params are valid") {
    std::string message;
    wideattn_prefill_params p = test::valid_params();
    CHECK(validate_params(&p, &message) == WIDEATTN_OK);
    p.lse = fake(0x60000000);
    p.lse_head_stride = p.total_q;
    CHECK(validate_params(&p, &message) == WIDEATTN_OK);
    p.total_q = 0;  // an empty batch is valid: nothing to do
    CHECK(validate_params(&p, &message) == WIDEATTN_OK);
}

TEST_CASE("validation: null params") {
    std::string message;
    CHECK(validate_params(nullptr, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "params is NULL");
}

TEST_CASE("validation: each bad input is refused with its own message") {
    const std::vector<BadCase<wideattn_prefill_params>> cases = {
        {"q null", [](auto& p) { p.q = nullptr; }, "q is NULL"},
        {"k_cache null", [](auto& p) { p.k_cache = nullptr; }, "k_cache is NULL"},
        {"v_cache null", [](auto& p) { p.v_cache = nullptr; }, "v_cache is NULL"},
        {"o null", [](auto& p) { p.o = nullptr; }, "o is NULL"},
        {"cu_seqlens_q null", [](auto& p) { p.cu_seqlens_q = nullptr; }, "cu_seqlens_q is NULL"},
        {"seq_lens_k null", [](auto& p) { p.seq_lens_k = nullptr; }, "seq_lens_k is NULL"},
        {"block_table null", [](auto& p) { p.block_table = nullptr; }, "block_table is NULL"},
        {"q misaligned", [](auto& p) { p.q = fake(0x10000008); }, "q=0x10000008 is not 16-byte aligned"},
        {"k misaligned", [](auto& p) { p.k_cache = fake(0x20000002); }, "k_cache=0x20000002 is not 16-byte aligned"},
        {"v misaligned", [](auto& p) { p.v_cache = fake(0x30000004); }, "v_cache=0x30000004 is not 16-byte aligned"},
        {"o misaligned", [](auto& p) { p.o = fake(0x4000000a); }, "o=0x4000000a is not 16-byte aligned"},
        {"cu_seqlens misaligned", [](auto& p) { p.cu_seqlens_q = static_cast<const int32_t*>(fake(0x50000002)); },
         "cu_seqlens_q=0x50000002 is not 4-byte aligned"},
        {"block_table misaligned", [](auto& p) { p.block_table = static_cast<const int32_t*>(fake(0x50002001)); },
         "block_table=0x50002001 is not 4-byte aligned"},
        {"lse misaligned",
         [](auto& p) {
             p.lse = fake(0x60000002);
             p.lse_head_stride = p.total_q;
         },
         "lse=0x60000002 is not 4-byte aligned"},
        {"lse stride too small",
         [](auto& p) {
             p.lse = fake(0x60000000);
             p.lse_head_stride = 99;
         },
         "lse_head_stride=99 is smaller than total_q=100"},
        {"num_seqs 0", [](auto& p) { p.num_seqs = 0; }, "num_seqs=0 must be >= 1"},
        {"total_q negative", [](auto& p) { p.total_q = -1; }, "total_q=-1 must be >= 0"},
        {"num_kv_heads 0", [](auto& p) { p.num_kv_heads = 0; }, "num_kv_heads=0 must be >= 1"},
        {"num_q_heads 0", [](auto& p) { p.num_q_heads = 0; }, "num_q_heads=0 must be >= 1"},
        {"heads do not divide", [](auto& p) { p.num_q_heads = 30; },
         "num_q_heads=30 is not a multiple of num_kv_heads=4"},
        {"head_dim 0", [](auto& p) { p.head_dim = 0; }, "head_dim=0 must be >= 1"},
        {"head_dim not 16 bytes", [](auto& p) { p.head_dim = 500; }, "head_dim=500 is not a multiple of 16 bytes"},
        {"block_size 8", [](auto& p) { p.block_size = 8; }, "block_size=8 is not a positive multiple of 16"},
        {"block_size 24", [](auto& p) { p.block_size = 24; }, "block_size=24 is not a positive multiple of 16"},
        {"block_size 0", [](auto& p) { p.block_size = 0; }, "block_size=0 is not a positive multiple of 16"},
        {"num_blocks 0", [](auto& p) { p.num_blocks = 0; }, "num_blocks=0 must be >= 1"},
        {"table stride 0", [](auto& p) { p.block_table_stride = 0; }, "block_table_stride=0 must be >= 1"},
        {"scale zero", [](auto& p) { p.softmax_scale = 0.0f; }, "softmax_scale=0 must be finite and > 0"},
        {"scale negative", [](auto& p) { p.softmax_scale = -1.0f; }, "softmax_scale=-1 must be finite and > 0"},
        {"scale nan", [](auto& p) { p.softmax_scale = NAN; }, "softmax_scale=nan must be finite and > 0"},
        {"scale inf", [](auto& p) { p.softmax_scale = INFINITY; }, "softmax_scale=inf must be finite and > 0"},
        {"reserved", [](auto& p) { p.reserved = 3; }, "reserved=3 must be 0"},
        {"q dtype", [](auto& p) { p.q_dtype = 9; }, "q_dtype=9 is not a wideattn_dtype"},
        {"kv dtype", [](auto& p) { p.kv_dtype = -1; }, "kv_dtype=-1 is not a wideattn_dtype"},
        {"o dtype", [](auto& p) { p.o_dtype = 5; }, "o_dtype=5 is not a wideattn_dtype"},
        {"q token stride misaligned", [](auto& p) { p.q_token_stride = 16388; },
         "q_token_stride=16388 is not a multiple of 8 elements"},
        {"q head stride zero", [](auto& p) { p.q_head_stride = 0; }, "q_head_stride=0 must be >= 1"},
        {"k block stride misaligned", [](auto& p) { p.k_block_stride = 33; },
         "k_block_stride=33 is not a multiple of 8 elements"},
        {"k slot stride", [](auto& p) { p.k_slot_stride = -8; }, "k_slot_stride=-8 must be >= 1"},
        {"k head stride", [](auto& p) { p.k_head_stride = 4; }, "k_head_stride=4 is not a multiple of 8 elements"},
        {"v block stride", [](auto& p) { p.v_block_stride = 0; }, "v_block_stride=0 must be >= 1"},
        {"v slot stride", [](auto& p) { p.v_slot_stride = 12; }, "v_slot_stride=12 is not a multiple of 8 elements"},
        {"v head stride", [](auto& p) { p.v_head_stride = 1; }, "v_head_stride=1 is not a multiple of 8 elements"},
        {"o token stride", [](auto& p) { p.o_token_stride = 2; }, "o_token_stride=2 is not a multiple of 8 elements"},
        {"o head stride", [](auto& p) { p.o_head_stride = 0; }, "o_head_stride=0 must be >= 1"},
        {"o rows overlap", [](auto& p) { p.o_head_stride = 256; },
         "o_token_stride=16384 and o_head_stride=256 make output rows overlap"},
        {"o tokens overlap", [](auto& p) { p.o_token_stride = 512 * 16; },
         "o_token_stride=8192 and o_head_stride=512 make output rows overlap"},
        {"fp8 kv without scale", [](auto& p) { p.kv_dtype = WIDEATTN_DTYPE_E4M3; },
         "k_scale is NULL but kv_dtype=e4m3 needs a scale"},
        {"fp8 q without scale", [](auto& p) { p.q_dtype = WIDEATTN_DTYPE_E4M3; },
         "q_scale is NULL but q_dtype=e4m3 needs a scale"},
        {"scale on bf16", [](auto& p) { p.v_scale = static_cast<const float*>(fake(0x70000000)); },
         "v_scale=0x70000000 is set but kv_dtype=bf16 takes no scale"},
    };
    check_each_refused(cases, test::valid_params, validate_params, MessageMatch::kContains);
}

TEST_CASE("validation: head-major output layout is accepted") {
    wideattn_prefill_params p = test::valid_params();
    p.o_token_stride = 512;                 // o[head][token][d]
    p.o_head_stride = int64_t{512} * 100;   // total_q tokens per head
    std::string message;
    CHECK(validate_params(&p, &message) == WIDEATTN_OK);
    p.o_head_stride = int64_t{512} * 99;
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("validation: quantise-into-cache arguments") {
    std::string message;
    wideattn_quantize_params good = test::valid_quantize_params();
    CHECK(validate_quantize_params(&good, &message) == WIDEATTN_OK);
    CHECK(validate_quantize_params(nullptr, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "params is NULL");
    const std::vector<BadCase<wideattn_quantize_params>> cases = {
        {"src null", [](auto& p) { p.src = nullptr; }, "src is NULL"},
        {"cache null", [](auto& p) { p.cache = nullptr; }, "cache is NULL"},
        {"identity slots past the cache", [](auto& p) { p.slot_mapping = nullptr; p.tokens = 129; },
         "tokens=129 exceed num_blocks * block_size = 128 slots with slot_mapping NULL (slot = token)"},
        {"scale null", [](auto& p) { p.scale = nullptr; }, "scale is NULL"},
        {"src misaligned", [](auto& p) { p.src = fake(0x10000008); }, "src=0x10000008 is not 16-byte aligned"},
        {"cache misaligned", [](auto& p) { p.cache = fake(0x20000004); }, "cache=0x20000004 is not 8-byte aligned"},
        {"slot_mapping misaligned", [](auto& p) { p.slot_mapping = static_cast<const int64_t*>(fake(0x30000004)); },
         "slot_mapping=0x30000004 is not 8-byte aligned"},
        {"counter misaligned", [](auto& p) { p.nonfinite_count = static_cast<int32_t*>(fake(0x40000002)); },
         "nonfinite_count=0x40000002 is not 4-byte aligned"},
        {"tokens negative", [](auto& p) { p.tokens = -2; }, "tokens=-2 must be >= 0"},
        {"heads zero", [](auto& p) { p.heads = 0; }, "heads=0 must be >= 1"},
        {"block_size zero", [](auto& p) { p.block_size = 0; }, "block_size=0 must be >= 1"},
        {"num_blocks zero", [](auto& p) { p.num_blocks = 0; }, "num_blocks=0 must be >= 1"},
        {"head_dim not 8", [](auto& p) { p.head_dim = 500; }, "head_dim=500 is not a positive multiple of 8"},
        {"src stride", [](auto& p) { p.src_token_stride = 2052; }, "src_token_stride=2052 is not a multiple of 8 elements"},
        {"cache block stride", [](auto& p) { p.cache_block_stride = 100; },
         "cache_block_stride=100 is not a positive multiple of 8"},
        {"cache slot stride", [](auto& p) { p.cache_slot_stride = 0; }, "cache_slot_stride=0 is not a positive multiple of 8"},
        {"cache head stride", [](auto& p) { p.cache_head_stride = 4; }, "cache_head_stride=4 is not a positive multiple of 8"},
    };
    check_each_refused(cases, test::valid_quantize_params, validate_quantize_params, MessageMatch::kContains);
    wideattn_quantize_params f32 = test::valid_quantize_params();
    f32.src_dtype = WIDEATTN_DTYPE_F32;
    CHECK(validate_quantize_params(&f32, &message) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(message.find("src_dtype=2 is not supported") != std::string::npos);
}

TEST_CASE("validation: the flat destination (slot_mapping NULL, e.g. Q) is accepted while tokens fit") {
    std::string message;
    wideattn_quantize_params q = test::valid_quantize_params();
    q.slot_mapping = nullptr;
    q.block_size = 1;
    q.num_blocks = q.tokens;
    q.cache_block_stride = q.cache_slot_stride = int64_t{q.heads} * q.head_dim;
    CHECK(validate_quantize_params(&q, &message) == WIDEATTN_OK);
    q.tokens = 0;
    CHECK(validate_quantize_params(&q, &message) == WIDEATTN_OK);
    q.tokens = q.num_blocks + 1;
    CHECK(validate_quantize_params(&q, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "tokens=11 exceed num_blocks * block_size = 10 slots with slot_mapping NULL (slot = token)");
}

TEST_CASE("validation: per-tensor scale (amax) arguments") {
    std::string message;
    wideattn_scale_params good = test::valid_scale_params();
    CHECK(validate_scale_params(&good, &message) == WIDEATTN_OK);
    good.slot_mapping = nullptr;  // every token counts
    good.nonfinite_count = nullptr;
    good.tokens = 0;
    CHECK(validate_scale_params(&good, &message) == WIDEATTN_OK);
    CHECK(validate_scale_params(nullptr, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "params is NULL");
    const std::vector<BadCase<wideattn_scale_params>> cases = {
        {"src null", [](auto& p) { p.src = nullptr; }, "src is NULL"},
        {"scale null", [](auto& p) { p.scale = nullptr; }, "scale is NULL"},
        {"src misaligned", [](auto& p) { p.src = fake(0x10000008); }, "src=0x10000008 is not 16-byte aligned"},
        {"scale misaligned", [](auto& p) { p.scale = static_cast<float*>(fake(0x30001002)); },
         "scale=0x30001002 is not 4-byte aligned"},
        {"slot_mapping misaligned", [](auto& p) { p.slot_mapping = static_cast<const int64_t*>(fake(0x30000004)); },
         "slot_mapping=0x30000004 is not 8-byte aligned"},
        {"counter misaligned", [](auto& p) { p.nonfinite_count = static_cast<int32_t*>(fake(0x40000002)); },
         "nonfinite_count=0x40000002 is not 4-byte aligned"},
        {"tokens negative", [](auto& p) { p.tokens = -1; }, "tokens=-1 must be >= 0"},
        {"heads zero", [](auto& p) { p.heads = 0; }, "heads=0 must be >= 1"},
        {"head_dim zero", [](auto& p) { p.head_dim = 0; }, "head_dim=0 must be >= 1"},
        {"head_dim not 8", [](auto& p) { p.head_dim = 36; }, "head_dim=36 is not a positive multiple of 8"},
        {"token stride zero", [](auto& p) { p.src_token_stride = 0; }, "src_token_stride=0 must be >= 1"},
        {"token stride odd", [](auto& p) { p.src_token_stride = 2050; },
         "src_token_stride=2050 is not a multiple of 8 elements"},
        {"head stride", [](auto& p) { p.src_head_stride = 4; }, "src_head_stride=4 is not a multiple of 8 elements"},
    };
    // Each message names the argument and its value first.
    check_each_refused(cases, test::valid_scale_params, validate_scale_params, MessageMatch::kStartsWith);
    wideattn_scale_params e4m3 = test::valid_scale_params();
    e4m3.src_dtype = WIDEATTN_DTYPE_E4M3;
    CHECK(validate_scale_params(&e4m3, &message) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(message == "src_dtype=4 is not supported (bf16 = 0)");
    e4m3.src_dtype = 77;
    CHECK(validate_scale_params(&e4m3, &message) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(message == "src_dtype=77 is not supported (bf16 = 0)");
}
