// test_validation.cpp - every bad argument gets its own case and a message naming the
// argument and its value; wideattn_is_supported and wideattn_prefill validate identically.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
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
        {"flags: an unknown bit", [](auto& p) { p.flags = 8; },
         "flags=8 has unknown bits 0x8 (the flags are WIDEATTN_FLAG_CHECK_METADATA = 1, "
         "WIDEATTN_FLAG_V_TRANSPOSED = 2 and WIDEATTN_FLAG_K_FROM_V = 4)"},
        {"flags: checked mode and unknown bits", [](auto& p) { p.flags = WIDEATTN_FLAG_CHECK_METADATA | 0x40; },
         "flags=65 has unknown bits 0x40 (the flags are WIDEATTN_FLAG_CHECK_METADATA = 1, "
         "WIDEATTN_FLAG_V_TRANSPOSED = 2 and WIDEATTN_FLAG_K_FROM_V = 4)"},
        {"flags: the sign bit", [](auto& p) { p.flags = INT32_MIN; },
         "flags=-2147483648 has unknown bits 0x80000000 (the flags are WIDEATTN_FLAG_CHECK_METADATA = 1, "
         "WIDEATTN_FLAG_V_TRANSPOSED = 2 and WIDEATTN_FLAG_K_FROM_V = 4)"},
        {"flags: the transposed V layout with bf16 K/V", [](auto& p) { p.flags = WIDEATTN_FLAG_V_TRANSPOSED; },
         "flags has WIDEATTN_FLAG_V_TRANSPOSED but kv_dtype=bf16: the transposed V layout holds e4m3 codes only"},
        {"max_seqlen_q negative", [](auto& p) { p.max_seqlen_q = -1; }, "max_seqlen_q=-1 must be >= 0"},
        {"max_seqlen_k negative", [](auto& p) { p.max_seqlen_k = -5; }, "max_seqlen_k=-5 must be >= 0"},
        {"num_splits negative", [](auto& p) { p.num_splits = -2; }, "num_splits=-2 must be >= 0"},
        {"num_splits too many", [](auto& p) { p.num_splits = 129; },
         "num_splits=129 is larger than WIDEATTN_MAX_SPLITS=128"},
        {"workspace bytes without workspace", [](auto& p) { p.workspace_bytes = 4096; },
         "workspace is NULL but workspace_bytes=4096 (pass 0 without a workspace)"},
        {"workspace bytes negative",
         [](auto& p) {
             p.workspace = fake(0x70000000);
             p.workspace_bytes = -1;
         },
         "workspace_bytes=-1 must be >= 0"},
        {"workspace misaligned",
         [](auto& p) {
             p.workspace = fake(0x70000008);
             p.workspace_bytes = 4096;
         },
         "workspace=0x70000008 is not 16-byte aligned"},
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
        {"cache heads overlap", [](auto& p) { p.cache_head_stride = 256; },
         "cache_head_stride=256 is smaller than head_dim = 512: cache rows overlap"},
        {"cache slots overlap", [](auto& p) { p.cache_slot_stride = 1024; },
         "cache_slot_stride=1024 is smaller than cache_head_stride x heads = 512 x 4 = 2048: cache rows overlap"},
        {"cache blocks overlap", [](auto& p) { p.cache_block_stride = 2048; },
         "cache_block_stride=2048 is smaller than cache_slot_stride x block_size = 2048 x 16 = 32768: cache rows "
         "overlap"},
        {"cache strides equal", [](auto& p) { p.cache_slot_stride = p.cache_head_stride; },
         "cache_slot_stride=512 is smaller than cache_head_stride x heads = 512 x 4 = 2048: cache rows overlap"},
    };
    check_each_refused(cases, test::valid_quantize_params, validate_quantize_params, MessageMatch::kContains);
    wideattn_quantize_params f32 = test::valid_quantize_params();
    f32.src_dtype = WIDEATTN_DTYPE_F32;
    CHECK(validate_quantize_params(&f32, &message) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(message.find("src_dtype=2 is not supported") != std::string::npos);
}

TEST_CASE("validation: quantise-into-cache takes any cache layout whose rows do not overlap") {
    std::string message;
    wideattn_quantize_params hnd = test::valid_quantize_params();  // [block][head][slot][d] (vLLM's HND)
    hnd.cache_slot_stride = hnd.head_dim;
    hnd.cache_head_stride = int64_t{hnd.block_size} * hnd.head_dim;
    CHECK_MESSAGE(validate_quantize_params(&hnd, &message) == WIDEATTN_OK, message);
    wideattn_quantize_params kv_interleaved = test::valid_quantize_params();  // [block][2][slot][head][d]
    kv_interleaved.cache_block_stride *= 2;
    CHECK_MESSAGE(validate_quantize_params(&kv_interleaved, &message) == WIDEATTN_OK, message);
    wideattn_quantize_params one_head = test::valid_quantize_params();  // a stride never applied: anything
    one_head.heads = 1;
    one_head.cache_head_stride = 8;
    one_head.src_token_stride = one_head.head_dim;
    CHECK_MESSAGE(validate_quantize_params(&one_head, &message) == WIDEATTN_OK, message);
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
    // A value that is no wideattn_dtype is a bad argument, as it is for the prefill dtypes.
    e4m3.src_dtype = 77;
    CHECK(validate_scale_params(&e4m3, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "src_dtype=77 is not a wideattn_dtype (0..4)");
    wideattn_quantize_params quantize = test::valid_quantize_params();
    quantize.src_dtype = -1;
    CHECK(validate_quantize_params(&quantize, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "src_dtype=-1 is not a wideattn_dtype (0..4)");
}

TEST_CASE("validation: strides whose products overflow are refused, naming the field and value") {
    constexpr int64_t k2to59 = int64_t{1} << 59, k2to62 = int64_t{1} << 62, k2to58 = int64_t{1} << 58;
    const std::vector<BadCase<wideattn_prefill_params>> cases = {
        // The overlap check multiplied 2^59 by 32 heads, wrapped to 0 and accepted these rows,
        // which overlap (token 1 of head 0 starts 8 elements past head 1 of token 0).
        {"o strides near 2^59",
         [](auto& p) {
             p.o_token_stride = k2to59 + 8;
             p.o_head_stride = k2to59;
         },
         "o_token_stride=576460752303423496 and o_head_stride=576460752303423488 make output rows overlap"},
        {"o rows disjoint but beyond 2^63 bytes", [](auto& p) { p.o_token_stride = k2to58; },
         "o_token_stride=288230376151711744 with total_q=100 puts the last element of o (2-byte elements) 2^63 bytes "
         "or more past its start: the offsets overflow"},
        {"q token stride", [](auto& p) { p.q_token_stride = k2to62; },
         "q_token_stride=4611686018427387904 with total_q=100 puts the last element of q"},
        {"k slot stride 2^62", [](auto& p) { p.k_slot_stride = k2to62; },
         "k_slot_stride=4611686018427387904 with block_size=16 puts the last element of k_cache"},
        {"k block stride 2^62", [](auto& p) { p.k_block_stride = k2to62; },
         "k_block_stride=4611686018427387904 with num_blocks=2048 puts the last element of k_cache"},
        {"v head stride 2^62", [](auto& p) { p.v_head_stride = k2to62; },
         "v_head_stride=4611686018427387904 with num_kv_heads=4 puts the last element of v_cache"},
        {"v block stride at the limit", [](auto& p) { p.v_block_stride = INT64_MAX - 7; },
         "v_block_stride=9223372036854775800 with num_blocks=2048"},
        // Each term fits, their sum does not: the largest term's stride is named.
        {"k terms that sum past 2^63",
         [](auto& p) {
             p.num_blocks = 2;
             p.k_block_stride = k2to62 / 2;
             p.k_slot_stride = k2to62 / 32;
             p.k_head_stride = k2to62 / 8;
         },
         "k_block_stride=2305843009213693952 with num_blocks=2 puts the last element of k_cache"},
        {"lse head stride",
         [](auto& p) {
             p.lse = fake(0x60000000);
             p.lse_head_stride = INT64_MAX;
         },
         "lse_head_stride=9223372036854775807 with num_q_heads=32 puts the last element of lse (4-byte elements)"},
        {"block table stride",
         [](auto& p) { p.block_table_stride = int64_t{1} << 61; },
         "block_table_stride=2305843009213693952 with num_seqs=2 puts the last element of block_table"},
        {"q near the top of the address space", [](auto& p) { p.q = fake(UINTPTR_MAX - 0xfff); },
         "q=0xfffffffffffff000 plus the 3276798 bytes to its last element runs past the end of the 64-bit address "
         "space"},
        {"cu_seqlens_q at the top", [](auto& p) { p.cu_seqlens_q = static_cast<const int32_t*>(fake(UINTPTR_MAX - 3)); },
         "cu_seqlens_q=0xfffffffffffffffc plus the 8 bytes to its last element runs past the end"},
    };
    check_each_refused(cases, test::valid_params, validate_params, MessageMatch::kStartsWith);
}

TEST_CASE("validation: a stride no element uses may be anything") {
    std::string message;
    wideattn_prefill_params p = test::valid_params();
    p.num_blocks = 1;
    p.k_block_stride = p.v_block_stride = INT64_MAX - 7;  // one block: its stride is never applied
    p.num_seqs = 1;
    p.block_table_stride = INT64_MAX;
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    // One token and one head: neither output stride separates two rows.
    p = test::valid_params();
    p.total_q = 1;
    p.num_q_heads = p.num_kv_heads = 1;
    p.o_token_stride = 8;
    p.o_head_stride = INT64_MAX - 7;
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    p.total_q = 2;
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message.find("make output rows overlap") != std::string::npos);
    // An empty batch writes no element.
    p = test::valid_params();
    p.total_q = 0;
    p.o_token_stride = p.q_token_stride = INT64_MAX - 7;
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
}

TEST_CASE("validation: quantise and scale extents are checked") {
    const std::vector<BadCase<wideattn_quantize_params>> quantize = {
        {"cache block stride", [](auto& p) { p.cache_block_stride = int64_t{1} << 62; },
         "cache_block_stride=4611686018427387904 with num_blocks=8 puts the last element of cache (1-byte elements)"},
        {"cache head stride", [](auto& p) { p.cache_head_stride = INT64_MAX - 7; },
         "cache_head_stride=9223372036854775800 with heads=4"},
        {"src token stride", [](auto& p) { p.src_token_stride = int64_t{1} << 62; },
         "src_token_stride=4611686018427387904 with tokens=10 puts the last element of src (2-byte elements)"},
        {"slot mapping at the top", [](auto& p) { p.slot_mapping = static_cast<const int64_t*>(fake(UINTPTR_MAX - 7)); },
         "slot_mapping=0xfffffffffffffff8 plus the 72 bytes to its last element runs past the end"},
    };
    check_each_refused(quantize, test::valid_quantize_params, validate_quantize_params, MessageMatch::kStartsWith);
    const std::vector<BadCase<wideattn_scale_params>> scale = {
        {"src head stride", [](auto& p) { p.src_head_stride = int64_t{1} << 62; },
         "src_head_stride=4611686018427387904 with heads=4 puts the last element of src"},
        {"src at the top", [](auto& p) { p.src = fake(UINTPTR_MAX - 15); },
         "src=0xfffffffffffffff0 plus the"},
    };
    check_each_refused(scale, test::valid_scale_params, validate_scale_params, MessageMatch::kStartsWith);
}

// Up to e2619f8 only o's own rows were checked for overlap: every case below was accepted.
TEST_CASE("validation: outputs share no byte with each other or with an input") {
    const std::vector<BadCase<wideattn_prefill_params>> cases = {
        {"o is q", [](auto& p) { p.o = const_cast<void*>(p.q); },
         "o (bytes 0x10000000..0x1031ffff) overlaps q (bytes 0x10000000..0x1031ffff): an output may share no byte "
         "with an input"},
        {"o runs into k_cache's last block", [](auto& p) { p.o = fake(0x27fff000); },
         "o (bytes 0x27fff000..0x2831efff) overlaps k_cache (bytes 0x20000000..0x27ffffff)"},
        {"o starts in v_cache", [](auto& p) { p.o = fake(0x37fffff0); }, "o (bytes 0x37fffff0..0x3831ffef) overlaps "
                                                                         "v_cache (bytes 0x30000000..0x37ffffff)"},
        {"lse inside o",
         [](auto& p) {
             p.lse = fake(0x40000100);
             p.lse_head_stride = p.total_q;
         },
         "o (bytes 0x40000000..0x4031ffff) overlaps lse (bytes 0x40000100..0x400032ff): an output may share no byte "
         "with another output"},
        {"workspace over cu_seqlens_q",
         [](auto& p) {
             p.workspace = fake(0x50000000);
             p.workspace_bytes = 0x4000;
         },
         "workspace (bytes 0x50000000..0x50003fff) overlaps cu_seqlens_q (bytes 0x50000000..0x5000000b)"},
        {"workspace over o",
         [](auto& p) {
             p.workspace = fake(0x40300000);
             p.workspace_bytes = 1 << 20;
         },
         "o (bytes 0x40000000..0x4031ffff) overlaps workspace (bytes 0x40300000..0x403fffff)"},
        {"o over seq_lens_k", [](auto& p) { p.o = fake(0x4ffff000); },
         "o (bytes 0x4ffff000..0x5031efff) overlaps cu_seqlens_q (bytes 0x50000000..0x5000000b)"},
        {"o over the block table's last row", [](auto& p) { p.o = fake(0x50003ff0); },
         "o (bytes 0x50003ff0..0x50323fef) overlaps block_table (bytes 0x50002000..0x50003fff)"},
        {"q_scale inside o",
         [](auto& p) {
             p.q_dtype = WIDEATTN_DTYPE_E4M3;
             p.q_scale = static_cast<const float*>(fake(0x40000010));
         },
         "o (bytes 0x40000000..0x4031ffff) overlaps q_scale (bytes 0x40000010..0x40000013)"},
    };
    check_each_refused(cases, test::valid_params, validate_params, MessageMatch::kStartsWith);
}

TEST_CASE("validation: inputs may share bytes, and an empty or absent output has none") {
    std::string message;
    wideattn_prefill_params same = test::valid_params();  // one tensor read as K and as V
    same.v_cache = same.k_cache;
    CHECK_MESSAGE(validate_params(&same, &message) == WIDEATTN_OK, message);
    wideattn_prefill_params interleaved = test::valid_params();  // [block][2][slot][head][d] (FlashInfer)
    interleaved.num_blocks = 1024;
    interleaved.k_block_stride = interleaved.v_block_stride = 2 * test::valid_params().k_block_stride;
    interleaved.v_cache = static_cast<const char*>(interleaved.k_cache) + test::valid_params().k_block_stride * 2;
    CHECK_MESSAGE(validate_params(&interleaved, &message) == WIDEATTN_OK, message);
    wideattn_prefill_params fused_qkv = test::valid_params();  // q, k and v rows of one projection
    fused_qkv.k_cache = fused_qkv.v_cache = fused_qkv.q;
    CHECK_MESSAGE(validate_params(&fused_qkv, &message) == WIDEATTN_OK, message);
    wideattn_prefill_params empty = test::valid_params();  // no row of o, lse or q to touch
    empty.total_q = 0;
    empty.o = const_cast<void*>(empty.q);
    empty.lse = fake(0x10000000);
    CHECK_MESSAGE(validate_params(&empty, &message) == WIDEATTN_OK, message);
}

TEST_CASE("validation: K/V as token-row pages reach up to their last block's first slot") {
    // Dense rows [1000][4][512] as pages of 16 rows starting at any row (the varlen layout): block
    // b is row b, so the 15 slots past the last block's first are rows no block owns.
    constexpr int64_t kRows = 1000, kRowElems = 4 * 512, kRowBytes = kRowElems * 2;
    std::string message;
    wideattn_prefill_params p = test::valid_params();
    p.num_blocks = static_cast<int32_t>(kRows);
    p.k_block_stride = p.k_slot_stride = p.v_block_stride = p.v_slot_stride = kRowElems;
    p.o = fake(0x20000000 + kRows * kRowBytes);  // o right after K's rows
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    p.o = fake(0x20000000 + (kRows - 1) * kRowBytes);  // o over K's last row
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message.rfind("o (bytes 0x203e7000..0x20706fff) overlaps k_cache (bytes 0x20000000..0x203e7fff)", 0) == 0);
}

TEST_CASE("validation: quantise and scale outputs share no byte with each other or with an input") {
    const std::vector<BadCase<wideattn_quantize_params>> quantize_cases = {
        {"cache over src", [](auto& p) { p.cache = const_cast<void*>(p.src); },
         "cache (bytes 0x10000000..0x1003ffff) overlaps src (bytes 0x10000000..0x10009fff): an output may share no "
         "byte with an input"},
        {"counter inside cache", [](auto& p) { p.nonfinite_count = static_cast<int32_t*>(fake(0x20000008)); },
         "cache (bytes 0x20000000..0x2003ffff) overlaps nonfinite_count (bytes 0x20000008..0x2000000b): an output may "
         "share no byte with another output"},
        {"cache over slot_mapping", [](auto& p) { p.cache = fake(0x2fffff00); },
         "cache (bytes 0x2fffff00..0x3003feff) overlaps slot_mapping (bytes 0x30000000..0x3000004f)"},
        {"counter is scale", [](auto& p) { p.nonfinite_count = static_cast<int32_t*>(fake(0x30001000)); },
         "nonfinite_count (bytes 0x30001000..0x30001003) overlaps scale (bytes 0x30001000..0x30001003)"},
    };
    check_each_refused(quantize_cases, test::valid_quantize_params, validate_quantize_params,
                       MessageMatch::kStartsWith);
    const std::vector<BadCase<wideattn_scale_params>> scale_cases = {
        {"scale is the counter", [](auto& p) { p.nonfinite_count = reinterpret_cast<int32_t*>(p.scale); },
         "scale (bytes 0x30001000..0x30001003) overlaps nonfinite_count (bytes 0x30001000..0x30001003): an output "
         "may share no byte with another output"},
        {"scale inside src", [](auto& p) { p.scale = static_cast<float*>(fake(0x10000004)); },
         "scale (bytes 0x10000004..0x10000007) overlaps src (bytes 0x10000000..0x10009fff): an output may share no "
         "byte with an input"},
        {"counter over slot_mapping", [](auto& p) { p.nonfinite_count = static_cast<int32_t*>(fake(0x30000048)); },
         "nonfinite_count (bytes 0x30000048..0x3000004b) overlaps slot_mapping (bytes 0x30000000..0x3000004f)"},
    };
    check_each_refused(scale_cases, test::valid_scale_params, validate_scale_params, MessageMatch::kStartsWith);
    std::string message;
    wideattn_quantize_params empty = test::valid_quantize_params();  // no source row to overwrite
    empty.tokens = 0;
    empty.cache = const_cast<void*>(empty.src);
    CHECK_MESSAGE(validate_quantize_params(&empty, &message) == WIDEATTN_OK, message);
}

namespace {

// Valid params with e4m3 Q/K/V and V in the dense transposed layout (WIDEATTN_FLAG_V_TRANSPOSED).
wideattn_prefill_params valid_transposed_params() {
    wideattn_prefill_params p = test::valid_params();
    p.q_dtype = p.kv_dtype = WIDEATTN_DTYPE_E4M3;
    p.q_scale = static_cast<const float*>(fake(0x50000000));
    p.k_scale = static_cast<const float*>(fake(0x50000010));
    p.v_scale = static_cast<const float*>(fake(0x50000020));
    p.flags = WIDEATTN_FLAG_V_TRANSPOSED;
    p.v_slot_stride = 1;
    p.v_head_stride = int64_t{p.head_dim} * p.block_size;
    p.v_block_stride = p.v_head_stride * p.num_kv_heads;
    return p;
}

// Valid quantise params writing the dense transposed V layout.
wideattn_quantize_params valid_transposed_quantize_params() {
    wideattn_quantize_params p = test::valid_quantize_params();
    p.flags = WIDEATTN_FLAG_V_TRANSPOSED;
    p.cache_slot_stride = 1;
    p.cache_head_stride = int64_t{p.head_dim} * p.block_size;
    p.cache_block_stride = p.cache_head_stride * p.heads;
    return p;
}

}  // namespace

TEST_CASE("validation: the transposed V layout, for prefill and for the quantise step that writes it") {
    std::string message;
    const wideattn_prefill_params prefill = valid_transposed_params();
    CHECK_MESSAGE(validate_params(&prefill, &message) == WIDEATTN_OK, message);
    const wideattn_quantize_params quantize = valid_transposed_quantize_params();
    CHECK_MESSAGE(validate_quantize_params(&quantize, &message) == WIDEATTN_OK, message);

    const std::vector<BadCase<wideattn_prefill_params>> prefill_cases = {
        {"the engine layout's slot stride", [](auto& p) { p.v_slot_stride = 4 * 512; },
         "v_slot_stride=2048 must be 1 with WIDEATTN_FLAG_V_TRANSPOSED (the slots of a transposed page row are "
         "contiguous)"},
        {"o over the transposed cache's last page", [](auto& p) { p.o = fake(0x30000000 + 2047 * 4 * 512 * 16); },
         "o (bytes"},
    };
    check_each_refused(prefill_cases, valid_transposed_params, validate_params, MessageMatch::kStartsWith);
    const std::vector<BadCase<wideattn_quantize_params>> quantize_cases = {
        {"an unknown flag", [](auto& p) { p.flags = 4; },
         "flags=4 has unknown bits 0x4 (the only flag is WIDEATTN_FLAG_V_TRANSPOSED = 2)"},
        {"no slot mapping", [](auto& p) { p.slot_mapping = nullptr; },
         "slot_mapping is NULL with WIDEATTN_FLAG_V_TRANSPOSED (the transposed layout is a paged cache)"},
        {"pages of 8 slots", [](auto& p) { p.block_size = 8; },
         "block_size=8 is not a positive multiple of 16 (WIDEATTN_FLAG_V_TRANSPOSED interleaves groups of 16 "
         "slots)"},
        {"the engine layout's slot stride", [](auto& p) { p.cache_slot_stride = 2048; },
         "cache_slot_stride=2048 must be 1 with WIDEATTN_FLAG_V_TRANSPOSED"},
        {"page rows of a head overlapping the next head's", [](auto& p) { p.cache_head_stride = 512 * 16 - 8; },
         "cache rows overlap"},
    };
    check_each_refused(quantize_cases, valid_transposed_quantize_params, validate_quantize_params,
                       MessageMatch::kContains);
}

namespace {

// A fake device address for K from V's inv_freq table (rotary_dims 128: 64 floats, 256 bytes),
// apart from valid_params' tensors and from k_norm_scale's 2 KiB.
constexpr uintptr_t kFakeInvFreq = 0x70001000;
// A fake device address for K from V's cos / sin table: kFakeCosSinPositions rows of 64 entries of
// 4 bytes (rotary_dims 128: 4 KiB), apart from the other tensors.
constexpr uintptr_t kFakeCosSin = 0x70002000;
constexpr int32_t kFakeCosSinPositions = 16;

// `desc` cut to its first `size` bytes (struct_size set to it) at the end of an allocation of exactly
// that size, so a read past it is out of bounds under the sanitizers: accepted by both validations,
// and the library's copy of it.
wideattn_k_from_v read_exact_size(const wideattn_k_from_v& desc, uint32_t size) {
    std::string message;
    wideattn_prefill_params p = test::k_from_v_params();
    wideattn_k_from_v cut = desc;
    cut.struct_size = size;
    std::vector<unsigned char> exact(size);
    std::memcpy(exact.data(), &cut, exact.size());
    p.k_from_v = reinterpret_cast<const wideattn_k_from_v*>(exact.data());
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    CHECK_MESSAGE(validate_plan_params(&p, &message) == WIDEATTN_OK, message);
    wideattn_k_from_v copy{};
    REQUIRE(read_k_from_v(p, &copy, &message) == WIDEATTN_OK);
    return copy;
}

// The two sizes of wideattn_k_from_v: C API 0.5.0's 32 bytes, whose inv_freq is never read (the
// description lies at the end of an allocation of exactly 32 bytes, so a read past it is out of
// bounds under the sanitizers, and in a 40-byte buffer whose last 8 bytes hold a misaligned
// pointer that would be refused if read), and 0.6.0's 40 with a table, which then needs no theta.
void check_k_from_v_versions() {
    std::string message;
    wideattn_prefill_params p = test::k_from_v_params();
    wideattn_k_from_v desc = test::k_from_v_desc();
    desc.struct_size = 32;
    wideattn_k_from_v copy = read_exact_size(desc, 32);
    CHECK(copy.inv_freq == nullptr);
    CHECK(copy.rope_theta == desc.rope_theta);

    desc.inv_freq = reinterpret_cast<const float*>(kFakeInvFreq + 1);  // misaligned: refused if read
    p.k_from_v = &desc;
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    REQUIRE(read_k_from_v(p, &copy, &message) == WIDEATTN_OK);
    CHECK(copy.inv_freq == nullptr);

    desc.struct_size = sizeof(wideattn_k_from_v);
    CHECK(sizeof(wideattn_k_from_v) == 56);
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "k_from_v.inv_freq=0x70001001 is not 4-byte aligned");
    desc.inv_freq = reinterpret_cast<const float*>(kFakeInvFreq);
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    REQUIRE(read_k_from_v(p, &copy, &message) == WIDEATTN_OK);
    CHECK(copy.inv_freq == desc.inv_freq);
    desc.rope_theta = NAN;  // not read with a table
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    desc.rope_theta = 0.0f;
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    desc.rotary_dims = 0;  // no frequency rotates: the table holds no entry
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    desc.struct_size = 32;  // the same theta without the table: refused
    desc.rotary_dims = test::kTestRotaryDims;
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message.find("k_from_v.rope_theta=0 must be finite and > 0") == 0);
}

// C API 0.6.0's 40 bytes, whose cos_sin, cos_sin_positions and reserved2 are never read (the
// description at the end of an allocation of exactly 40 bytes, and in a 56-byte buffer whose last
// 16 bytes hold a misaligned table, a position count without it and a non-zero reserved2, each
// refused if read), and 0.7.0's 56 with a table: a partial one leaves the formula, and so theta,
// to the positions past it.
void check_k_from_v_cos_sin_versions() {
    std::string message;
    wideattn_prefill_params p = test::k_from_v_params();
    wideattn_k_from_v desc = test::k_from_v_desc();
    desc.struct_size = 40;
    wideattn_k_from_v copy = read_exact_size(desc, 40);
    CHECK(copy.cos_sin == nullptr);
    CHECK(copy.cos_sin_positions == 0);

    desc.cos_sin = reinterpret_cast<const void*>(kFakeCosSin + 4);  // misaligned: refused if read
    desc.cos_sin_positions = -1;
    desc.reserved2 = 7;
    p.k_from_v = &desc;
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    REQUIRE(read_k_from_v(p, &copy, &message) == WIDEATTN_OK);
    CHECK(copy.cos_sin == nullptr);
    CHECK(copy.cos_sin_positions == 0);
    CHECK(copy.reserved2 == 0);

    desc.struct_size = sizeof(wideattn_k_from_v);
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "k_from_v.reserved2=7 must be 0");
    desc.reserved2 = 0;
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "k_from_v.cos_sin_positions=-1 must be >= 1 with a cos_sin table");
    desc.cos_sin_positions = kFakeCosSinPositions;
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "k_from_v.cos_sin=0x70002004 is not 8-byte aligned");
    desc.cos_sin = reinterpret_cast<const void*>(kFakeCosSin);
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    CHECK_MESSAGE(validate_plan_params(&p, &message) == WIDEATTN_OK, message);
    REQUIRE(read_k_from_v(p, &copy, &message) == WIDEATTN_OK);
    CHECK(std::memcmp(&copy, &desc, sizeof copy) == 0);
    desc.inv_freq = reinterpret_cast<const float*>(kFakeInvFreq);  // both tables
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    desc.inv_freq = nullptr;
    desc.rope_theta = 0.0f;  // keys past the table's rows take the formula: theta is still read
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message.find("k_from_v.rope_theta=0 must be finite and > 0") == 0);
    desc.rope_theta = test::kTestRopeTheta;
    desc.cos_sin_positions = INT32_MAX;  // 2^31 - 1 rows: 512 GiB from 0x70002000, within the address space
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
}

}  // namespace

TEST_CASE("validation: K from V, each bad input is refused with its own message") {
    std::string message;
    wideattn_prefill_params p = test::k_from_v_params();
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    CHECK_MESSAGE(validate_plan_params(&p, &message) == WIDEATTN_OK, message);
    p.k_block_stride = p.k_slot_stride = p.k_head_stride = -3;  // not read in this mode
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    p = test::k_from_v_params();
    test::k_from_v_desc().rotary_dims = 0;  // no rotation: K = bf16(V * w)
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    test::k_from_v_desc().rotary_dims = p.head_dim;
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    test::k_from_v_desc().struct_size = sizeof(wideattn_k_from_v) + 8;  // a newer header's, its new bytes 0
    std::vector<unsigned char> newer(sizeof(wideattn_k_from_v) + 8, 0);
    std::memcpy(newer.data(), &test::k_from_v_desc(), sizeof(wideattn_k_from_v));
    p.k_from_v = reinterpret_cast<const wideattn_k_from_v*>(newer.data());
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    newer.back() = 1;
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message.find("wideattn_k_from_v.struct_size=64 is larger than this library's 56 and byte 63 is not zero") ==
          0);

    check_k_from_v_versions();
    check_k_from_v_cos_sin_versions();

    const auto desc = [](std::function<void(wideattn_k_from_v&)> edit) {
        return [edit](wideattn_prefill_params&) { edit(test::k_from_v_desc()); };
    };
    const std::vector<BadCase<wideattn_prefill_params>> cases = {
        {"the flag without a description", [](auto& p) { p.k_from_v = nullptr; },
         "k_from_v is NULL but flags has WIDEATTN_FLAG_K_FROM_V (point it to a wideattn_k_from_v)"},
        {"struct_size 0", desc([](auto& d) { d.struct_size = 0; }),
         "wideattn_k_from_v.struct_size=0 is below 32, the size of its first version (C API 0.5.0): set it to "
         "sizeof(wideattn_k_from_v)"},
        {"struct_size short", desc([](auto& d) { d.struct_size = 24; }),
         "wideattn_k_from_v.struct_size=24 is below 32, the size of its first version (C API 0.5.0): set it to "
         "sizeof(wideattn_k_from_v) (accepted: 32 (C API 0.5.0), 40 (C API 0.6.0) or 56 (C API 0.7.0), or larger "
         "with zero bytes past 56)"},
        {"struct_size 33", desc([](auto& d) { d.struct_size = 33; }),
         "wideattn_k_from_v.struct_size=33 is not the size of a version (32 (C API 0.5.0), 40 (C API 0.6.0) or 56 "
         "(C API 0.7.0)): it ends inside a field; set it to sizeof(wideattn_k_from_v)"},
        {"struct_size 36", desc([](auto& d) { d.struct_size = 36; }),
         "wideattn_k_from_v.struct_size=36 is not the size of a version (32 (C API 0.5.0), 40 (C API 0.6.0) or 56 "
         "(C API 0.7.0))"},
        {"struct_size 39", desc([](auto& d) { d.struct_size = 39; }),
         "wideattn_k_from_v.struct_size=39 is not the size of a version"},
        {"struct_size 41", desc([](auto& d) { d.struct_size = 41; }),
         "wideattn_k_from_v.struct_size=41 is not the size of a version"},
        {"struct_size 48", desc([](auto& d) { d.struct_size = 48; }),
         "wideattn_k_from_v.struct_size=48 is not the size of a version"},
        {"struct_size 52", desc([](auto& d) { d.struct_size = 52; }),
         "wideattn_k_from_v.struct_size=52 is not the size of a version"},
        {"struct_size 55", desc([](auto& d) { d.struct_size = 55; }),
         "wideattn_k_from_v.struct_size=55 is not the size of a version"},
        {"cos_sin_positions without a table", desc([](auto& d) { d.cos_sin_positions = 16; }),
         "k_from_v.cos_sin_positions=16 must be 0 without a cos_sin table (k_from_v.cos_sin is NULL)"},
        {"cos_sin_positions negative without a table", desc([](auto& d) { d.cos_sin_positions = -1; }),
         "k_from_v.cos_sin_positions=-1 must be 0 without a cos_sin table (k_from_v.cos_sin is NULL)"},
        {"cos_sin without positions", desc([](auto& d) { d.cos_sin = reinterpret_cast<const void*>(kFakeCosSin); }),
         "k_from_v.cos_sin_positions=0 must be >= 1 with a cos_sin table"},
        {"cos_sin positions negative", desc([](auto& d) {
             d.cos_sin = reinterpret_cast<const void*>(kFakeCosSin);
             d.cos_sin_positions = INT32_MIN;
         }),
         "k_from_v.cos_sin_positions=-2147483648 must be >= 1 with a cos_sin table"},
        {"cos_sin 4-byte aligned", desc([](auto& d) {
             d.cos_sin = reinterpret_cast<const void*>(kFakeCosSin + 4);
             d.cos_sin_positions = kFakeCosSinPositions;
         }),
         "k_from_v.cos_sin=0x70002004 is not 8-byte aligned"},
        {"cos_sin with rotary_dims 0", desc([](auto& d) {
             d.cos_sin = reinterpret_cast<const void*>(kFakeCosSin);
             d.cos_sin_positions = kFakeCosSinPositions;
             d.rotary_dims = 0;
         }),
         "k_from_v.rotary_dims=0 must be a positive multiple of 4 with a cos_sin table (its rows hold whole 8-byte "
         "pairs of frequencies)"},
        {"cos_sin with rotary_dims 2", desc([](auto& d) {
             d.cos_sin = reinterpret_cast<const void*>(kFakeCosSin);
             d.cos_sin_positions = kFakeCosSinPositions;
             d.rotary_dims = 2;
         }),
         "k_from_v.rotary_dims=2 must be a positive multiple of 4 with a cos_sin table"},
        {"cos_sin with rotary_dims 126", desc([](auto& d) {
             d.cos_sin = reinterpret_cast<const void*>(kFakeCosSin);
             d.cos_sin_positions = kFakeCosSinPositions;
             d.rotary_dims = 126;
         }),
         "k_from_v.rotary_dims=126 must be a positive multiple of 4 with a cos_sin table"},
        {"reserved2", desc([](auto& d) { d.reserved2 = 3; }), "k_from_v.reserved2=3 must be 0"},
        {"cos_sin past the address space", desc([](auto& d) {
             d.cos_sin = reinterpret_cast<const void*>(UINTPTR_MAX - 0xfff);
             d.cos_sin_positions = kFakeCosSinPositions + 1;
         }),
         "k_from_v.cos_sin=0xfffffffffffff000 plus the 4348 bytes to its last element runs past the end of the "
         "64-bit address space"},
        {"o over cos_sin",
         [](auto& p) {
             test::k_from_v_desc().cos_sin = reinterpret_cast<const void*>(kFakeCosSin);
             test::k_from_v_desc().cos_sin_positions = kFakeCosSinPositions;
             p.o = fake(kFakeCosSin + 0xff0);
         },
         "overlaps k_from_v.cos_sin (bytes 0x70002000..0x70002fff): an output may share no byte with an input"},
        {"inv_freq misaligned", desc([](auto& d) { d.inv_freq = reinterpret_cast<const float*>(kFakeInvFreq + 2); }),
         "k_from_v.inv_freq=0x70001002 is not 4-byte aligned"},
        {"theta nan without a table", desc([](auto& d) { d.rope_theta = NAN; }),
         "k_from_v.rope_theta=nan must be finite and > 0 (or pass the model's k_from_v.inv_freq)"},
        {"o over inv_freq",
         [](auto& p) {
             test::k_from_v_desc().inv_freq = reinterpret_cast<const float*>(kFakeInvFreq);
             p.o = fake(kFakeInvFreq - 0x800);
         },
         "overlaps k_from_v.inv_freq (bytes 0x70001000..0x700010ff): an output may share no byte with an input"},
        {"k_cache given", [](auto& p) { p.k_cache = reinterpret_cast<const void*>(0x20000000); },
         "k_cache=0x20000000 is set but flags has WIDEATTN_FLAG_K_FROM_V: K is rebuilt from v_cache (pass NULL)"},
        {"k_norm_scale NULL", desc([](auto& d) { d.k_norm_scale = nullptr; }),
         "k_from_v.k_norm_scale is NULL (k_norm's weight, fp32 [head_dim])"},
        {"k_norm_scale misaligned", desc([](auto& d) { d.k_norm_scale = reinterpret_cast<const float*>(0x70000002); }),
         "k_from_v.k_norm_scale=0x70000002 is not 4-byte aligned"},
        {"theta 0", desc([](auto& d) { d.rope_theta = 0.0f; }), "k_from_v.rope_theta=0 must be finite and > 0"},
        {"theta negative", desc([](auto& d) { d.rope_theta = -1.0e6f; }),
         "k_from_v.rope_theta=-1e+06 must be finite and > 0"},
        {"theta nan", desc([](auto& d) { d.rope_theta = NAN; }), "k_from_v.rope_theta=nan must be finite and > 0"},
        {"theta inf", desc([](auto& d) { d.rope_theta = INFINITY; }), "k_from_v.rope_theta=inf must be finite and > 0"},
        {"rotary_dims odd", desc([](auto& d) { d.rotary_dims = 127; }),
         "k_from_v.rotary_dims=127 must be even and in 0..head_dim=512"},
        {"rotary_dims over head_dim", desc([](auto& d) { d.rotary_dims = 514; }),
         "k_from_v.rotary_dims=514 must be even and in 0..head_dim=512"},
        {"rotary_dims negative", desc([](auto& d) { d.rotary_dims = -2; }),
         "k_from_v.rotary_dims=-2 must be even and in 0..head_dim=512"},
        {"rope_type", desc([](auto& d) { d.rope_type = 0; }),
         "k_from_v.rope_type=0 is not a RoPE type (WIDEATTN_ROPE_PROPORTIONAL = 1 is the one defined)"},
        {"pairing", desc([](auto& d) { d.pairing = 2; }),
         "k_from_v.pairing=2 is not a pairing (WIDEATTN_ROPE_ROTATE_HALF = 1 is the one defined)"},
        {"reserved", desc([](auto& d) { d.reserved = 5; }), "k_from_v.reserved=5 must be 0"},
        {"f16 V", [](auto& p) { p.kv_dtype = WIDEATTN_DTYPE_F16; },
         "with WIDEATTN_FLAG_K_FROM_V: K is rebuilt from a bf16 or e4m3 V cache only"},
        {"e4m3 V without v_scale", [](auto& p) { p.kv_dtype = WIDEATTN_DTYPE_E4M3; },
         "v_scale is NULL but kv_dtype=e4m3 needs a scale"},
        {"o over k_norm_scale", [](auto& p) { p.o = fake(0x6ffffff0); },
         "overlaps k_from_v.k_norm_scale (bytes 0x70000000..0x700007ff): an output may share no byte with an input"},
    };
    check_each_refused(cases, test::k_from_v_params, validate_params, MessageMatch::kContains);
    check_each_refused(cases, test::k_from_v_params, validate_plan_params, MessageMatch::kContains);
}

TEST_CASE("validation: K from V over an e4m3 V-only cache takes v_scale, and k_scale NULL or set (not read)") {
    std::string message;
    wideattn_prefill_params p = test::k_from_v_params();
    p.kv_dtype = WIDEATTN_DTYPE_E4M3;
    p.v_scale = static_cast<const float*>(fake(0x70010000));
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    CHECK_MESSAGE(validate_plan_params(&p, &message) == WIDEATTN_OK, message);
    p.k_scale = static_cast<const float*>(fake(0x70020000));
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
    // A K+V call over the same cache still needs k_scale.
    p = test::valid_params();
    p.kv_dtype = WIDEATTN_DTYPE_E4M3;
    p.v_scale = static_cast<const float*>(fake(0x70010000));
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "k_scale is NULL but kv_dtype=e4m3 needs a scale");
}

TEST_CASE("validation: a K+V call without k_cache points to K from V; a description without the flag is not read") {
    std::string message;
    wideattn_prefill_params p = test::valid_params();
    p.k_cache = nullptr;
    CHECK(validate_params(&p, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(message == "k_cache is NULL (a V-only cache needs WIDEATTN_FLAG_K_FROM_V in flags and params.k_from_v)");
    p = test::valid_params();
    p.k_from_v = reinterpret_cast<const wideattn_k_from_v*>(0x8);  // never dereferenced without the flag
    CHECK_MESSAGE(validate_params(&p, &message) == WIDEATTN_OK, message);
}
