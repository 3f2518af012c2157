// plan_fuzz_check.h - what must hold for every sequence of plan calls, shared by the libFuzzer
// target (fuzz_plan.cpp, which traps on a violation) and the fake-driver test that replays
// random inputs (tests/test_plan.cpp). An input is read as a program: field writes into a valid
// decode step's params and options, a wideattn_plan_create, then runs, runs with a stated layout,
// info queries, destroys and calls with forged or stale handles. The invariants: every call
// returns a status (the sanitizers catch a crash or a use after free); a refusal carries a
// message and leaves *plan NULL; a success gives a handle; a destroyed or never-created handle is
// refused with WIDEATTN_ERROR_INVALID_ARGUMENT; a live one keeps working. Runs go through the
// stand-in driver, which dereferences no device pointer (checked mode, which would copy the
// metadata, is masked out of the fuzzed flags).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "wideattn.h"

namespace wideattn::fuzz {

// Reads the input front to back; past its end every read is 0.
class ByteReader {
public:
    ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
    bool done() const { return at_ >= size_; }
    uint8_t u8() { return at_ < size_ ? data_[at_++] : 0; }
    uint64_t u64() {
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v |= uint64_t{u8()} << (8 * i);
        return v;
    }
    // A value a field is likely to care about, or any 64 bits.
    int64_t value() {
        static const int64_t kInteresting[] = {0, 1, -1, 2, 4, 8, 16, 31, 32, 512, 1024, 2048, 16384, 65536,
                                               INT32_MAX, INT32_MIN, int64_t{1} << 40, int64_t{1} << 62, INT64_MAX,
                                               INT64_MIN};
        const uint8_t pick = u8();
        constexpr size_t n = sizeof kInteresting / sizeof kInteresting[0];
        if (pick < n) return kInteresting[pick];
        if (pick < 200) return static_cast<int64_t>(u64());
        return static_cast<int64_t>(u8()) * 16;
    }

private:
    const uint8_t* data_;
    size_t size_;
    size_t at_ = 0;
};

// A valid decode step (4 sequences, Gemma 4 31B's heads, page 16) whose run tensors are NULL.
inline wideattn_prefill_params fuzz_step_params() {
    wideattn_prefill_params p{};
    const int64_t hq = 32, hkv = 4, d = 512, block = 16;
    auto at = [](uintptr_t a) { return reinterpret_cast<void*>(a); };
    p.q_token_stride = hq * d;
    p.q_head_stride = d;
    p.k_slot_stride = p.v_slot_stride = hkv * d;
    p.k_head_stride = p.v_head_stride = d;
    p.k_block_stride = p.v_block_stride = block * hkv * d;
    p.o_token_stride = hq * d;
    p.o_head_stride = d;
    p.cu_seqlens_q = static_cast<const int32_t*>(at(0x50000000));
    p.seq_lens_k = static_cast<const int32_t*>(at(0x50001000));
    p.block_table = static_cast<const int32_t*>(at(0x50002000));
    p.block_table_stride = 64;
    p.num_seqs = 4;
    p.total_q = 4;
    p.num_q_heads = static_cast<int32_t>(hq);
    p.num_kv_heads = static_cast<int32_t>(hkv);
    p.head_dim = static_cast<int32_t>(d);
    p.block_size = static_cast<int32_t>(block);
    p.num_blocks = 256;
    p.q_dtype = p.kv_dtype = p.o_dtype = WIDEATTN_DTYPE_BF16;
    p.softmax_scale = 1.0f;
    p.max_seqlen_q = 1;
    p.max_seqlen_k = 1024;
    return p;
}

// Writes a fuzzed value into one of the params' fields (index taken modulo their number).
inline void write_param(wideattn_prefill_params* p, uint8_t field, int64_t v) {
    const auto ptr = [v] { return reinterpret_cast<void*>(static_cast<uintptr_t>(v)); };
    const auto i32 = [v] { return static_cast<int32_t>(v); };
    switch (field % 36) {
        case 0: p->q = ptr(); break;
        case 1: p->q_token_stride = v; break;
        case 2: p->q_head_stride = v; break;
        case 3: p->k_cache = ptr(); break;
        case 4: p->k_block_stride = v; break;
        case 5: p->k_slot_stride = v; break;
        case 6: p->k_head_stride = v; break;
        case 7: p->v_cache = ptr(); break;
        case 8: p->v_block_stride = v; break;
        case 9: p->v_slot_stride = v; break;
        case 10: p->v_head_stride = v; break;
        case 11: p->o = ptr(); break;
        case 12: p->o_token_stride = v; break;
        case 13: p->lse = ptr(); break;
        case 14: p->lse_head_stride = v; break;
        case 15: p->cu_seqlens_q = static_cast<const int32_t*>(ptr()); break;
        case 16: p->seq_lens_k = static_cast<const int32_t*>(ptr()); break;
        case 17: p->block_table = static_cast<const int32_t*>(ptr()); break;
        case 18: p->block_table_stride = v; break;
        case 19: p->k_scale = static_cast<const float*>(ptr()); break;
        case 20: p->num_seqs = i32(); break;
        case 21: p->total_q = i32(); break;
        case 22: p->num_q_heads = i32(); break;
        case 23: p->num_kv_heads = i32(); break;
        case 24: p->head_dim = i32(); break;
        case 25: p->block_size = i32(); break;
        case 26: p->num_blocks = i32(); break;
        case 27: p->kv_dtype = i32(); break;
        case 28: p->o_dtype = i32(); break;
        case 29: p->max_seqlen_q = i32(); break;
        case 30: p->max_seqlen_k = i32(); break;
        case 31: p->num_splits = i32(); break;
        case 32: p->workspace = ptr(); break;
        case 33: p->workspace_bytes = v; break;
        case 34: p->flags = i32() & ~WIDEATTN_FLAG_CHECK_METADATA; break;  // checked mode copies: not here
        default: std::memcpy(&p->softmax_scale, &v, sizeof p->softmax_scale); break;
    }
}

// The bytes of the buffer a fuzzed K-from-V description lives in: every struct_size it states fits.
constexpr size_t kKFromVBufferBytes = 256;

// Writes a fuzzed value into one of a K-from-V description's fields (index modulo their number).
inline void write_k_from_v(wideattn_k_from_v* d, uint8_t field, int64_t v) {
    const auto i32 = [v] { return static_cast<int32_t>(v); };
    switch (field % 11) {
        case 0: d->struct_size = static_cast<uint32_t>(static_cast<uint64_t>(v) % (kKFromVBufferBytes + 1)); break;
        case 1: d->rope_type = i32(); break;
        case 2: d->k_norm_scale = reinterpret_cast<const float*>(static_cast<uintptr_t>(v)); break;
        case 3: std::memcpy(&d->rope_theta, &v, sizeof d->rope_theta); break;
        case 4: d->rotary_dims = i32(); break;
        case 5: d->pairing = i32(); break;
        case 6: d->reserved = i32(); break;
        case 7: d->inv_freq = reinterpret_cast<const float*>(static_cast<uintptr_t>(v)); break;
        case 8: d->cos_sin = reinterpret_cast<const void*>(static_cast<uintptr_t>(v)); break;
        case 9: d->cos_sin_positions = i32(); break;
        default: d->reserved2 = i32(); break;
    }
}

// A pointer a run may be given: one of a few sane bases, or a fuzzed value.
inline void* run_pointer(ByteReader& in) {
    const uint8_t pick = in.u8();
    static const uintptr_t kBases[] = {0x10000000, 0x20000000, 0x30000000, 0x40000000, 0x60000000, 0x70000000,
                                       0x100000000, 0x180000000};
    if (pick < 8 * 16) return reinterpret_cast<void*>(kBases[pick % 8]);
    return reinterpret_cast<void*>(static_cast<uintptr_t>(in.value()));
}

// What a program did (the replay test checks that the paths are reached).
struct PlanFuzzStats {
    int created = 0, calls = 0, succeeded = 0;
};

// The first invariant the program `data` breaks against `ctx` ("" when all hold); counts into
// *stats when it is not NULL.
inline std::string plan_input_problem(wideattn_context* ctx, const uint8_t* data, size_t size,
                                      PlanFuzzStats* stats = nullptr) {
    PlanFuzzStats unused;
    if (!stats) stats = &unused;
    ByteReader in(data, size);
    wideattn_prefill_params p = fuzz_step_params();
    for (int writes = in.u8() % 8; writes > 0; --writes) write_param(&p, in.u8(), in.value());
    // K from V: the fp64 reference's call with a V-only cache and a fuzzed description, in a buffer
    // as large as any struct_size it may state.
    union KFromVBuffer {
        wideattn_k_from_v desc;
        uint8_t bytes[kKFromVBufferBytes];
    } k_from_v{};
    k_from_v.desc = wideattn_k_from_v{sizeof(wideattn_k_from_v), WIDEATTN_ROPE_PROPORTIONAL,
                                      reinterpret_cast<const float*>(uintptr_t{0x70000000}), 1.0e6f, 128,
                                      WIDEATTN_ROPE_ROTATE_HALF, 0, nullptr, nullptr, 0, 0};
    const uint8_t k_from_v_bits = in.u8();
    const bool rebuild_k = (k_from_v_bits & 1) != 0;
    if (rebuild_k) {
        p.flags |= WIDEATTN_FLAG_K_FROM_V;
        p.k_cache = nullptr;
        p.o_dtype = WIDEATTN_DTYPE_F64;
        p.k_from_v = &k_from_v.desc;
        for (int writes = (k_from_v_bits >> 1) % 4; writes > 0; --writes)
            write_k_from_v(&k_from_v.desc, in.u8(), in.value());
        if (k_from_v_bits & 0x80) k_from_v.bytes[sizeof(wideattn_k_from_v) + in.u8() % 16] = in.u8();
    }
    if (in.u8() & 1) p.q = reinterpret_cast<void*>(uintptr_t{0x10000000});
    const void* caches[4] = {reinterpret_cast<void*>(uintptr_t{0x100000000}), reinterpret_cast<void*>(uintptr_t{0x180000000}),
                             nullptr, nullptr};
    for (int i = 2; i < 4; ++i) caches[i] = run_pointer(in);
    // Versioned structs live in buffers as large as any struct_size the program states (a caller's
    // struct is as large as it says); the bytes past the struct are zero or fuzzed.
    union OptionsBuffer {
        wideattn_plan_options options;
        uint8_t bytes[256];
    } buffer{};
    wideattn_plan_options& options = buffer.options;
    options.struct_size = sizeof options;
    const uint8_t option_bits = in.u8();
    if (option_bits & 1) options.num_caches = option_bits >> 5;  // 0..7 of 4 entries: out of range refused
    if (options.num_caches > 4) options.num_caches = 4;
    options.k_caches = caches;
    options.v_caches = caches;
    if (option_bits & 2) options.struct_size = static_cast<uint32_t>(in.u8());
    if (option_bits & 16) buffer.bytes[sizeof options + in.u8() % (sizeof buffer - sizeof options)] = in.u8();
    if (option_bits & 4) options.flags = in.u8();
    std::vector<wideattn_plan*> live, dead;
    const auto refused_well = [](wideattn_status s) { return s == WIDEATTN_OK || wideattn_last_error()[0] != '\0'; };
    for (int plans = 0; plans < 2; ++plans) {
        wideattn_plan* plan = reinterpret_cast<wideattn_plan*>(uintptr_t{0x1234});
        const wideattn_status s = wideattn_plan_create(ctx, &p, (option_bits & 8) ? nullptr : &options, &plan);
        if (s == WIDEATTN_OK && !plan) return "wideattn_plan_create succeeded without a plan";
        if (s != WIDEATTN_OK && plan) return "a refused wideattn_plan_create left *plan set";
        if (!refused_well(s)) return "wideattn_plan_create refused without a message";
        if (s == WIDEATTN_OK) live.push_back(plan), ++stats->created;
    }
    while (!in.done()) {
        const uint8_t op = in.u8();
        wideattn_plan* target = nullptr;
        if (!live.empty() && (op & 0x80) == 0) target = live[in.u8() % live.size()];
        else if (!dead.empty() && (op & 0x40) == 0) target = dead[in.u8() % dead.size()];
        else target = reinterpret_cast<wideattn_plan*>(static_cast<uintptr_t>(in.value()));
        bool is_live = false;
        for (wideattn_plan* l : live) is_live |= l == target;
        wideattn_status s = WIDEATTN_OK;
        switch (op % 4) {
            case 0: {
                const void* q = run_pointer(in);
                const void* k = (rebuild_k && (in.u8() & 1)) ? nullptr : run_pointer(in);
                const void* v = run_pointer(in);
                void* o = run_pointer(in);
                void* lse = (in.u8() & 1) ? run_pointer(in) : nullptr;
                s = wideattn_plan_run(target, q, k, v, o, lse, nullptr);
                break;
            }
            case 1: {
                union {
                    wideattn_plan_tensors t;
                    uint8_t bytes[256];
                } tensors{};
                wideattn_plan_tensors& t = tensors.t;
                t.struct_size = (in.u8() & 1) ? static_cast<uint32_t>(in.u8()) : sizeof t;
                t.q = run_pointer(in);
                t.k_cache = run_pointer(in);
                t.v_cache = run_pointer(in);
                t.o = run_pointer(in);
                t.num_blocks = static_cast<int32_t>(in.value());
                t.head_dim = static_cast<int32_t>(in.value());
                t.k_block_stride = in.value();
                s = wideattn_plan_run_tensors(target, &t, nullptr);
                break;
            }
            case 2: {
                union {
                    wideattn_plan_info info;
                    uint8_t bytes[256];
                } info{};
                info.info.struct_size = (in.u8() & 1) ? static_cast<uint32_t>(in.u8()) : sizeof info.info;
                s = wideattn_plan_get_info(target, &info.info);
                break;
            }
            default: {
                s = wideattn_plan_destroy(target);
                if (s == WIDEATTN_OK && target && !is_live) return "a handle that was no live plan was destroyed";
                if (s == WIDEATTN_OK && is_live) {
                    for (size_t i = 0; i < live.size(); ++i)
                        if (live[i] == target) live.erase(live.begin() + static_cast<long>(i)), dead.push_back(target);
                }
                break;
            }
        }
        ++stats->calls;
        stats->succeeded += s == WIDEATTN_OK;
        if (!refused_well(s)) return "a plan call refused without a message";
        if (!is_live && target && s != WIDEATTN_ERROR_INVALID_ARGUMENT)
            return "a handle that is no live plan was not refused (status " + std::to_string(s) + ")";
        if (!is_live && target && std::strstr(wideattn_last_error(), "plan=") != wideattn_last_error())
            return std::string("the refusal of a dead or forged handle does not name it: ") + wideattn_last_error();
    }
    for (wideattn_plan* plan : live)
        if (wideattn_plan_destroy(plan) != WIDEATTN_OK) return "a live plan could not be destroyed";
    for (wideattn_plan* plan : dead)
        if (wideattn_plan_destroy(plan) != WIDEATTN_ERROR_INVALID_ARGUMENT) return "a dead plan was destroyed again";
    return std::string();
}

}  // namespace wideattn::fuzz
