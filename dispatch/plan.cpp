// plan.cpp - plans (wideattn_plan_create / _run / _destroy, C API 0.4.0) and wideattn_prefill,
// which builds a plan on the stack and runs it once: one launch path for both.
//
// A plan is split in two: what a call's params fix (validation, kernel selection, split count,
// kernel functions in the CUDA context, launch geometry, the tensors' extents, the spans of the
// tensors a run does not change, tensor maps of the caches named at creation), built once; and
// the per-layer part (five pointers checked against those extents and spans, tensor maps looked
// up, one launch per kernel), which allocates nothing and throws nothing on success.
//
// Handles are tokens of a process-wide registry (docs/design.md, "Plans", says why a registry
// rather than a magic number in the plan): (generation << 32) | (slot + 1), looked up before the
// plan is touched, so a destroyed plan, a plan of a closed context or any other value is refused
// with a message instead of being dereferenced.
#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dispatch/c_boundary.h"
#include "dispatch/context.h"
#include "dispatch/dependent_launch.h"
#include "dispatch/kv_tensor_maps.h"
#include "dispatch/metadata_check.h"
#include "dispatch/selection.h"
#include "dispatch/split_plan.h"
#include "dispatch/validation.h"
#include "dispatch/versioned_struct.h"
#include "kernels/common/k_from_v.h"
#include "wideattn.h"

static_assert(sizeof(void*) == 8, "plan tokens are 64-bit values");
// The versioned structs of C API 0.4.0 (their first version: the smallest struct_size accepted).
static_assert(sizeof(wideattn_plan_options) == 32, "wideattn_plan_options layout changed: update bindings");
static_assert(sizeof(wideattn_plan_tensors) == 120, "wideattn_plan_tensors layout changed: update bindings");
static_assert(sizeof(wideattn_plan_info) == 48, "wideattn_plan_info layout changed: update bindings");

namespace wideattn {
namespace {

constexpr size_t kPlanOptionsFirstSize = 32;  // C API 0.4.0
constexpr size_t kPlanTensorsFirstSize = 120;
constexpr size_t kPlanInfoFirstSize = 48;
constexpr char kPlanFirstVersion[] = "0.4.0";  // the plan structs' first version

// The tensors a run takes.
struct RunTensors {
    const void* q;
    const void* k_cache;
    const void* v_cache;
    void* o;
    void* lse;
};

// A tensor map the plan encoded at creation for a cache it was given.
struct OwnedMap {
    uint64_t base;
    CUtensorMap map;
};

constexpr int kMaxFixedInputs = 7;  // cu_seqlens_q, seq_lens_k, block_table, q_scale, k_scale, v_scale,
                                    // k_from_v.k_norm_scale

// What a call's params fix.
struct PlanCore {
    wideattn_context* ctx = nullptr;
    const Driver* drv = nullptr;
    CUcontext cu_ctx = nullptr;
    wideattn_prefill_params args{};  // the kernels' view: num_splits as it runs; the run's pointers patched in
    wideattn_launch_plan launch{};
    CUfunction function = nullptr, merge_function = nullptr;
    LaunchGeometry geometry, merge_geometry;
    bool launches = false;  // false: an empty batch, nothing to launch
    bool tma_kv = false, has_lse = false, checked = false;
    bool k_from_v = false;       // the call rebuilds K from V (WIDEATTN_FLAG_K_FROM_V): runs take no k_cache
    bool k_from_v_arg = false;   // the kernel takes the K-from-V description as its second argument
    wideattn_k_from_v k_from_v_desc{};  // that argument: the validated copy (zeros for a K+V call)
    bool merge_programmatic = false;  // the merge is a programmatic dependent launch (dependent_launch.h)
    TensorMapKey k_key{}, v_key{};  // the caches' map keys, base set per run
    PrefillExtents extents{};
    bool has_workspace_span = false;
    Span workspace_span{};
    Span inputs[kMaxFixedInputs]{};  // the spans a run does not change, but the workspace
    int input_count = 0;
    std::vector<OwnedMap> k_maps, v_maps;  // sorted by base (plans given caches at creation)
};

const std::string& kernel_name(const PlanCore& core, int32_t index) { return core.ctx->manifest.kernels[index].name; }

// The caller's params as the kernels take them: the bytes of a C API 0.4.0 struct, and k_from_v
// only when flags asks for K from V (a caller built against 0.4.0 has no such field: its struct
// ends where k_from_v begins, and it never sets the flag, whose bit 0.4.0 refused).
wideattn_prefill_params copy_params(const wideattn_prefill_params* params) {
    wideattn_prefill_params out{};
    std::memcpy(static_cast<void*>(&out), params, offsetof(wideattn_prefill_params, k_from_v));
    out.k_from_v = k_from_v_call(out.flags) ? params->k_from_v : nullptr;
    return out;
}

// Validation, the current device, the launch plan there and what a run needs of it. `one_shot`
// (wideattn_prefill): the params hold the run's tensors and were validated with them, so the
// per-run checks' extents and spans are not needed.
wideattn_status build_core(wideattn_context* ctx, const wideattn_prefill_params* params, bool one_shot,
                           PlanCore* core) {
    if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    std::string message;
    wideattn_status status =
        one_shot ? validate_params(params, &message) : validate_plan_params(params, &message);
    if (status != WIDEATTN_OK) return fail(status, message);
    CurrentDevice dev;
    if ((status = current_device(&dev)) != WIDEATTN_OK) return status;
    const std::string name = ctx->tuning.in_play() ? device_name(ctx, *dev.drv, dev.device) : std::string();
    if ((status = plan_launch(ctx, *params, dev.cc_major, dev.cc_minor, dev.num_sms, &name, true, &core->launch)) !=
        WIDEATTN_OK)
        return status;
    if ((status = check_smem(ctx, dev, core->launch.kernel_index)) != WIDEATTN_OK) return status;
    core->ctx = ctx;
    core->drv = dev.drv;
    core->cu_ctx = dev.cu_ctx;
    core->args = copy_params(params);
    core->args.num_splits = core->launch.num_splits;  // the kernels' view: the count that runs (grid.z)
    core->has_lse = params->lse != nullptr;
    core->checked = checked_mode(*params, ctx->check_metadata);
    const ManifestKernel& kernel = ctx->manifest.kernels[core->launch.kernel_index];
    core->geometry = launch_geometry(kernel, core->args);
    // An empty batch has no row to write: nothing launches (a forced split count would otherwise
    // queue a merge kernel over an empty grid, which the driver refuses).
    core->launches = core->args.total_q != 0 && core->geometry.grid_x != 0 && core->geometry.grid_y != 0;
    core->geometry.grid_z = static_cast<uint32_t>(core->launch.num_splits);
    core->tma_kv = kernel.has_feature(kFeatureTmaKv);
    core->k_from_v = k_from_v_call(params->flags);
    core->k_from_v_arg = kernel.has_feature(kFeatureKFromV);
    if ((status = read_k_from_v(core->args, &core->k_from_v_desc, &message)) != WIDEATTN_OK)
        return fail(status, message);
    if (core->launches) {
        const bool split = core->launch.num_splits > 1;
        if ((status = get_function(ctx, *dev.drv, dev.cu_ctx, core->launch.kernel_index, split, &core->function)) !=
            WIDEATTN_OK)
            return status;
        if (split) {
            const int32_t merge = core->launch.merge_kernel_index;
            core->merge_geometry = merge_launch_geometry(ctx->manifest.kernels[merge], core->args);
            if ((status = get_function(ctx, *dev.drv, dev.cu_ctx, merge, false, &core->merge_function)) != WIDEATTN_OK)
                return status;
            core->merge_programmatic = programmatic_merge_launch(
                ctx->pdl, dev.drv->cuLaunchKernelEx != nullptr, ctx->manifest.kernels[merge].arch_major);
        }
        if (core->tma_kv) {
            if (const std::string why = tensor_maps_unavailable(*dev.drv); !why.empty())
                return fail(WIDEATTN_ERROR_NO_DRIVER, kernel.name + ": " + why);
            core->k_key = kv_map_key(core->args, false, nullptr);
            core->v_key = kv_map_key(core->args, true, nullptr);
        }
    }
    if (one_shot) return WIDEATTN_OK;
    core->extents = prefill_extents(core->args);
    // The spans a run does not change: those of the params without the run's tensors.
    wideattn_prefill_params fixed = core->args;
    fixed.q = fixed.k_cache = fixed.v_cache = nullptr;
    fixed.o = fixed.lse = nullptr;
    std::vector<Span> spans;
    prefill_spans(fixed, &spans);
    for (const Span& s : spans) {
        if (std::strcmp(s.name, "workspace") == 0) {
            core->has_workspace_span = true;
            core->workspace_span = s;
        } else if (core->input_count < kMaxFixedInputs) {
            core->inputs[core->input_count++] = s;
        } else {
            return fail(WIDEATTN_ERROR_INTERNAL, "wideattn_plan_create: more fixed tensors than a plan holds");
        }
    }
    return WIDEATTN_OK;
}

// The span of a run tensor at `base` (clipped at the end of the address space, as validation does).
Span run_span(const char* name, const void* base, const Extent& e, bool written) {
    const uintptr_t first = reinterpret_cast<uintptr_t>(base);
    const uintptr_t last = e.last_byte <= UINTPTR_MAX - first ? first + e.last_byte : UINTPTR_MAX;
    return Span{name, first, last, written};
}

// The per-run checks of a plan's tensors (refusals name the argument, as validate_params does).
wideattn_status check_run_tensors(const PlanCore& core, const RunTensors& t) {
    const struct {
        const void* ptr;
        const char* name;
        const Extent* extent;
    } tensors[] = {{t.q, "q", &core.extents.q},
                   {t.k_cache, "k_cache", &core.extents.k_cache},
                   {t.v_cache, "v_cache", &core.extents.v_cache},
                   {t.o, "o", &core.extents.o}};
    if (core.k_from_v && t.k_cache)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                    "k_cache=" + pointer_text(t.k_cache) +
                        " is set but the plan rebuilds K from v_cache (WIDEATTN_FLAG_K_FROM_V): pass NULL");
    for (const auto& x : tensors) {
        if (!x.ptr && core.k_from_v && x.extent == &core.extents.k_cache) continue;
        if (!x.ptr) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, std::string(x.name) + " is NULL");
        if (reinterpret_cast<uintptr_t>(x.ptr) % kTensorAlignment != 0)
            return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                        std::string(x.name) + "=" + pointer_text(x.ptr) + " is not 16-byte aligned");
    }
    if (core.has_lse && !t.lse)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                    "lse is NULL but the plan was created with an lse (every run of it writes one)");
    if (!core.has_lse && t.lse)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "lse=" + pointer_text(t.lse) +
                                                         " is set but the plan was created without an lse (pass "
                                                         "NULL, or create the plan with params.lse set)");
    const uintptr_t lse_align = core.args.o_dtype == WIDEATTN_DTYPE_F64 ? sizeof(double) : sizeof(float);
    if (t.lse && reinterpret_cast<uintptr_t>(t.lse) % lse_align != 0)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "lse=" + pointer_text(t.lse) + " is not " +
                                                         std::to_string(lse_align) + "-byte aligned");
    for (const auto& x : tensors)
        if (x.extent->any && x.extent->last_element > UINTPTR_MAX - reinterpret_cast<uintptr_t>(x.ptr))
            return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, past_address_space(x.name, x.ptr, x.extent->last_element));
    if (t.lse && core.extents.lse.any &&
        core.extents.lse.last_element > UINTPTR_MAX - reinterpret_cast<uintptr_t>(t.lse))
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, past_address_space("lse", t.lse, core.extents.lse.last_element));
    // The overlap rule, spans in validate_params' order: o, lse, workspace, q, k_cache, v_cache,
    // then the metadata and scales.
    Span spans[6 + kMaxFixedInputs];
    size_t n = 0;
    if (core.extents.o.any) spans[n++] = run_span("o", t.o, core.extents.o, true);
    if (t.lse && core.extents.lse.any) spans[n++] = run_span("lse", t.lse, core.extents.lse, true);
    if (core.has_workspace_span) spans[n++] = core.workspace_span;
    if (core.extents.q.any) spans[n++] = run_span("q", t.q, core.extents.q, false);
    if (core.extents.k_cache.any && t.k_cache) spans[n++] = run_span("k_cache", t.k_cache, core.extents.k_cache, false);
    if (core.extents.v_cache.any) spans[n++] = run_span("v_cache", t.v_cache, core.extents.v_cache, false);
    for (int i = 0; i < core.input_count; ++i) spans[n++] = core.inputs[i];
    std::string message;
    if (!spans_apart(spans, n, &message)) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, message);
    return WIDEATTN_OK;
}

// The map of a cache at `base`: the plan's own, else the context's cache (encoded on a miss).
wideattn_status find_map(const PlanCore& core, const std::vector<OwnedMap>& owned, TensorMapKey key, const void* base,
                         const char* name, CUtensorMap* map) {
    key.base = reinterpret_cast<uint64_t>(base);
    const auto it = std::lower_bound(owned.begin(), owned.end(), key.base,
                                     [](const OwnedMap& m, uint64_t b) { return m.base < b; });
    if (it != owned.end() && it->base == key.base) {
        *map = it->map;
        return WIDEATTN_OK;
    }
    std::string message;
    const wideattn_status status = core.ctx->tensor_maps->get(*core.drv, key, name, map, &message);
    if (status != WIDEATTN_OK) return fail(status, kernel_name(core, core.launch.kernel_index) + ": " + message);
    return WIDEATTN_OK;
}

// The per-layer part: checks (unless `one_shot`: wideattn_prefill validated these tensors with
// its params), checked mode, tensor maps, the launches.
wideattn_status run_core(const PlanCore& core, const RunTensors& t, void* stream, bool one_shot) {
    if (!one_shot) {
        wideattn_status status = check_run_tensors(core, t);
        if (status != WIDEATTN_OK) return status;
        CUcontext current = nullptr;
        const CUresult r = core.drv->cuCtxGetCurrent(&current);
        if (r != CUDA_SUCCESS)
            return fail(WIDEATTN_ERROR_CUDA, "cuCtxGetCurrent failed: " + cuda_error_text(*core.drv, r));
        if (current != core.cu_ctx)
            return fail(current ? WIDEATTN_ERROR_INVALID_ARGUMENT : WIDEATTN_ERROR_NO_DEVICE,
                        "the plan was created in CUDA context " + pointer_text(core.cu_ctx) +
                            " but the calling thread's current CUDA context is " + pointer_text(current) +
                            " (a plan runs in the CUDA context it was created in: create one per context)");
    }
    wideattn_prefill_params args = core.args;
    args.q = t.q;
    args.k_cache = t.k_cache;
    args.v_cache = t.v_cache;
    args.o = t.o;
    args.lse = t.lse;
    if (core.checked) {
        std::string message;
        const wideattn_status status =
            check_device_metadata(*core.drv, args, static_cast<CUstream>(stream), &message);
        if (status != WIDEATTN_OK) return fail(status, message);
    }
    if (!core.launches) return WIDEATTN_OK;
    KvTensorMaps maps;  // the second argument of "tma_kv" kernels
    wideattn_k_from_v k_from_v_desc = core.k_from_v_desc;  // that of "k_from_v" kernels
    void* second = core.k_from_v_arg ? &k_from_v_desc : nullptr;
    if (core.tma_kv) {
        wideattn_status status = find_map(core, core.k_maps, core.k_key, t.k_cache, "k_cache", &maps.k);
        if (status == WIDEATTN_OK) status = find_map(core, core.v_maps, core.v_key, t.v_cache, "v_cache", &maps.v);
        if (status != WIDEATTN_OK) return status;
        second = &maps;
    }
    const LaunchGeometry& g = core.geometry;
    wideattn_status status = launch_function(*core.drv, core.function, kernel_name(core, core.launch.kernel_index),
                                             g.grid_x, g.grid_y, g.grid_z, g.block_x, g.dynamic_smem, &args, second,
                                             stream, false);
    if (status != WIDEATTN_OK || core.launch.num_splits == 1) return status;
    const LaunchGeometry& m = core.merge_geometry;
    return launch_function(*core.drv, core.merge_function, kernel_name(core, core.launch.merge_kernel_index), m.grid_x,
                           m.grid_y, m.grid_z, m.block_x, m.dynamic_smem, &args, nullptr, stream,
                           core.merge_programmatic);
}

// ------------------------------------------------------------------------------ the registry

struct PlanObject {
    PlanCore core;
};

enum class Ended : int { kNever = 0, kDestroyed = 1, kContextClosed = 2 };

struct Slot {
    std::atomic<uint32_t> generation{0};  // of the slot's current (or last) plan; 0: never used
    std::atomic<PlanObject*> plan{nullptr};
    std::atomic<int> ended{0};            // why the last plan ended (Ended)
};

constexpr uint32_t kSlotsPerChunk = 256;
constexpr uint32_t kChunks = 256;  // at most 65536 live plans
constexpr uint32_t kMaxPlans = kSlotsPerChunk * kChunks;

// Slots are never freed (a stale token must always find its slot), chunks are added as plans are
// made; lookups read them without the lock.
struct Registry {
    std::mutex mutex;  // create, destroy and close
    std::atomic<Slot*> chunks[kChunks] = {};
    std::vector<uint32_t> free_slots;
    uint32_t used = 0;  // slots handed out at least once
};

Registry& registry() {
    static Registry* r = new Registry;  // never destroyed: plans may be destroyed during static destruction
    return *r;
}

Slot* slot_at(const Registry& r, uint32_t index) {
    Slot* chunk = r.chunks[index / kSlotsPerChunk].load(std::memory_order_acquire);
    return chunk ? &chunk[index % kSlotsPerChunk] : nullptr;
}

std::string plan_text(const void* plan) { return "plan=" + pointer_text(plan); }

// The live plan of a token, or a refusal naming it.
wideattn_status lookup(const wideattn_plan* token, PlanObject** out, uint32_t* index_out = nullptr) {
    if (!token) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "plan is NULL");
    const uint64_t value = reinterpret_cast<uintptr_t>(token);
    const uint32_t low = static_cast<uint32_t>(value);
    const uint32_t generation = static_cast<uint32_t>(value >> 32);
    const Registry& r = registry();
    const Slot* slot = low == 0 || low > kMaxPlans ? nullptr : slot_at(r, low - 1);
    const uint32_t current = slot ? slot->generation.load(std::memory_order_acquire) : 0;
    if (!slot || generation == 0 || generation > current)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                    plan_text(token) + " is not a plan (no wideattn_plan_create returned it)");
    if (generation < current)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                    plan_text(token) + " is no longer live: it was destroyed (wideattn_plan_destroy or the "
                                       "wideattn_close of its context)");
    PlanObject* plan = slot->plan.load(std::memory_order_acquire);
    if (!plan) {
        const bool closed = slot->ended.load(std::memory_order_relaxed) == static_cast<int>(Ended::kContextClosed);
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                    plan_text(token) + (closed ? " is no longer live: its context was closed (wideattn_close "
                                                 "destroys the plans of a context)"
                                               : " is no longer live: it was destroyed (wideattn_plan_destroy)"));
    }
    *out = plan;
    if (index_out) *index_out = low - 1;
    return WIDEATTN_OK;
}

wideattn_status register_plan(std::unique_ptr<PlanObject> plan, wideattn_plan** out) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    uint32_t index;
    if (!r.free_slots.empty()) {
        index = r.free_slots.back();
        r.free_slots.pop_back();
    } else if (r.used < kMaxPlans) {
        index = r.used++;
        if (!r.chunks[index / kSlotsPerChunk].load(std::memory_order_relaxed))
            r.chunks[index / kSlotsPerChunk].store(new Slot[kSlotsPerChunk], std::memory_order_release);
    } else {
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "too many live plans (" + std::to_string(kMaxPlans) +
                                                         "): destroy the plans no longer used");
    }
    r.free_slots.reserve(r.used);  // destroy never allocates
    Slot* slot = slot_at(r, index);
    uint32_t generation = slot->generation.load(std::memory_order_relaxed) + 1;
    if (generation == 0) generation = 1;  // after 2^32 plans in one slot a very old token may match again
    slot->ended.store(static_cast<int>(Ended::kNever), std::memory_order_relaxed);
    slot->plan.store(plan.release(), std::memory_order_release);
    slot->generation.store(generation, std::memory_order_release);
    *out = reinterpret_cast<wideattn_plan*>((static_cast<uintptr_t>(generation) << 32) | (index + 1));
    return WIDEATTN_OK;
}

// Ends the plan in slot `index` (the registry's lock held).
void end_plan(Registry& r, uint32_t index, Ended why) {
    Slot* slot = slot_at(r, index);
    PlanObject* plan = slot->plan.exchange(nullptr, std::memory_order_acq_rel);
    slot->ended.store(static_cast<int>(why), std::memory_order_relaxed);
    r.free_slots.push_back(index);
    delete plan;
}

// ------------------------------------------------------------------------------ the entry points

wideattn_status check_options(const wideattn_plan_options& o) {
    if (o.flags != 0)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                    "options.flags=" + std::to_string(o.flags) + " has unknown bits (no option flag is defined: pass 0)");
    if (o.reserved != 0)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "options.reserved=" + std::to_string(o.reserved) + " must be 0");
    if (o.num_caches < 0 || o.num_caches > WIDEATTN_PLAN_MAX_CACHES)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "options.num_caches=" + std::to_string(o.num_caches) +
                                                         " is outside 0..WIDEATTN_PLAN_MAX_CACHES=" +
                                                         std::to_string(WIDEATTN_PLAN_MAX_CACHES));
    if (o.num_caches == 0) return WIDEATTN_OK;
    for (const auto& [list, name] : {std::pair<const void* const*, const char*>{o.k_caches, "k_caches"},
                                     {o.v_caches, "v_caches"}}) {
        if (!list)
            return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, std::string("options.") + name + " is NULL with num_caches=" +
                                                             std::to_string(o.num_caches));
        for (int32_t i = 0; i < o.num_caches; ++i) {
            const std::string what = std::string("options.") + name + "[" + std::to_string(i) + "]";
            if (!list[i]) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, what + " is NULL");
            if (reinterpret_cast<uintptr_t>(list[i]) % kTensorAlignment != 0)
                return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                            what + "=" + pointer_text(list[i]) + " is not 16-byte aligned");
        }
    }
    return WIDEATTN_OK;
}

// The maps of the caches listed in the options, sorted by base (duplicates once).
wideattn_status encode_listed(PlanCore* core, const wideattn_plan_options& o) {
    for (const bool is_value : {false, true}) {
        const void* const* list = is_value ? o.v_caches : o.k_caches;
        const Extent& extent = is_value ? core->extents.v_cache : core->extents.k_cache;
        std::vector<OwnedMap>& maps = is_value ? core->v_maps : core->k_maps;
        maps.reserve(static_cast<size_t>(o.num_caches));
        for (int32_t i = 0; i < o.num_caches; ++i) {
            const std::string what = std::string("options.") + (is_value ? "v_caches[" : "k_caches[") +
                                     std::to_string(i) + "]";
            if (extent.any && extent.last_element > UINTPTR_MAX - reinterpret_cast<uintptr_t>(list[i]))
                return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                            past_address_space(what.c_str(), list[i], extent.last_element));
            TensorMapKey key = is_value ? core->v_key : core->k_key;
            key.base = reinterpret_cast<uint64_t>(list[i]);
            OwnedMap m{};
            m.base = key.base;
            std::string message;
            const wideattn_status status = encode_kv_tensor_map(*core->drv, key, what.c_str(), &m.map, &message);
            if (status != WIDEATTN_OK)
                return fail(status, kernel_name(*core, core->launch.kernel_index) + ": " + message);
            maps.push_back(m);
        }
        std::sort(maps.begin(), maps.end(), [](const OwnedMap& a, const OwnedMap& b) { return a.base < b.base; });
        maps.erase(std::unique(maps.begin(), maps.end(),
                               [](const OwnedMap& a, const OwnedMap& b) { return a.base == b.base; }),
                   maps.end());
    }
    return WIDEATTN_OK;
}

wideattn_status plan_create(wideattn_context* ctx, const wideattn_prefill_params* params,
                            const wideattn_plan_options* options, wideattn_plan** out) {
    if (!out) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "plan (the output pointer) is NULL");
    *out = nullptr;
    if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    wideattn_plan_options o{};
    o.struct_size = sizeof o;
    std::string message;
    if (options && !read_versioned(options, kPlanOptionsFirstSize, kPlanFirstVersion, "wideattn_plan_options", &o, &message))
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, message);
    wideattn_status status = check_options(o);
    if (status != WIDEATTN_OK) return status;
    auto plan = std::make_unique<PlanObject>();
    if ((status = build_core(ctx, params, false, &plan->core)) != WIDEATTN_OK) return status;
    if (plan->core.tma_kv && plan->core.launches && o.num_caches > 0 &&
        (status = encode_listed(&plan->core, o)) != WIDEATTN_OK)
        return status;
    return register_plan(std::move(plan), out);
}

wideattn_status plan_run_tensors(const wideattn_plan* token, const wideattn_plan_tensors* tensors, void* stream) {
    PlanObject* plan = nullptr;
    wideattn_status status = lookup(token, &plan);
    if (status != WIDEATTN_OK) return status;
    if (!tensors) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "tensors is NULL");
    wideattn_plan_tensors t;
    std::string message;
    if (!read_versioned(tensors, kPlanTensorsFirstSize, kPlanFirstVersion, "wideattn_plan_tensors", &t, &message))
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, message);
    if (t.reserved != 0 || t.reserved2 != 0)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "tensors.reserved and tensors.reserved2 must be 0");
    const wideattn_prefill_params& p = plan->core.args;
    const struct {
        int64_t given, planned;
        const char* name;
    } layout[] = {{t.k_block_stride, p.k_block_stride, "k_block_stride"},
                  {t.k_slot_stride, p.k_slot_stride, "k_slot_stride"},
                  {t.k_head_stride, p.k_head_stride, "k_head_stride"},
                  {t.v_block_stride, p.v_block_stride, "v_block_stride"},
                  {t.v_slot_stride, p.v_slot_stride, "v_slot_stride"},
                  {t.v_head_stride, p.v_head_stride, "v_head_stride"},
                  {t.num_blocks, p.num_blocks, "num_blocks"},
                  {t.block_size, p.block_size, "block_size"},
                  {t.num_kv_heads, p.num_kv_heads, "num_kv_heads"},
                  {t.head_dim, p.head_dim, "head_dim"},
                  {t.kv_dtype_plus_one, int64_t{p.kv_dtype} + 1, "kv_dtype_plus_one"}};
    for (const auto& field : layout)
        if (field.given != 0 && field.given != field.planned)
            return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                        std::string("tensors.") + field.name + "=" + std::to_string(field.given) +
                            " differs from the plan's " + std::to_string(field.planned) +
                            ": the cache has another layout than the plan was created for (create a plan for it)");
    return run_core(plan->core, RunTensors{t.q, t.k_cache, t.v_cache, t.o, t.lse}, stream, false);
}

wideattn_status plan_get_info(const wideattn_plan* token, wideattn_plan_info* info) {
    PlanObject* plan = nullptr;
    wideattn_status status = lookup(token, &plan);
    if (status != WIDEATTN_OK) return status;
    if (!info) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "info is NULL");
    uint32_t size = 0;
    std::memcpy(&size, info, sizeof size);
    if (size < kPlanInfoFirstSize)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "wideattn_plan_info.struct_size=" + std::to_string(size) +
                                                         " is below " + std::to_string(kPlanInfoFirstSize) +
                                                         ", the size of its first version (C API 0.4.0): set it "
                                                         "to sizeof(wideattn_plan_info)");
    const PlanCore& core = plan->core;
    wideattn_plan_info out{};
    out.struct_size = size;
    out.has_lse = core.has_lse ? 1 : 0;
    out.launch = core.launch;
    out.num_cached_maps = static_cast<int32_t>(core.k_maps.size());
    out.tma_kv = core.tma_kv ? 1 : 0;
    out.checked = core.checked ? 1 : 0;
    std::memcpy(static_cast<void*>(info), &out, std::min<size_t>(size, sizeof out));
    return WIDEATTN_OK;
}

wideattn_status plan_destroy(wideattn_plan* token) {
    if (!token) return WIDEATTN_OK;
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    PlanObject* plan = nullptr;
    uint32_t index = 0;
    const wideattn_status status = lookup(token, &plan, &index);
    if (status != WIDEATTN_OK) return status;
    end_plan(r, index, Ended::kDestroyed);
    return WIDEATTN_OK;
}

}  // namespace

wideattn_status prefill_once(wideattn_context* ctx, const wideattn_prefill_params* params, void* stream) {
    PlanCore core;
    const wideattn_status status = build_core(ctx, params, true, &core);
    if (status != WIDEATTN_OK) return status;
    return run_core(core, RunTensors{params->q, params->k_cache, params->v_cache, params->o, params->lse}, stream,
                    true);
}

void retire_plans_of(const wideattn_context* ctx) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (uint32_t index = 0; index < r.used; ++index) {
        const Slot* slot = slot_at(r, index);
        const PlanObject* plan = slot->plan.load(std::memory_order_acquire);
        if (plan && plan->core.ctx == ctx) end_plan(r, index, Ended::kContextClosed);
    }
}

}  // namespace wideattn

extern "C" {

wideattn_status wideattn_plan_create(wideattn_context* ctx, const wideattn_prefill_params* params,
                                     const wideattn_plan_options* options, wideattn_plan** plan) {
    return wideattn::guarded("wideattn_plan_create",
                             [&] { return wideattn::plan_create(ctx, params, options, plan); });
}

wideattn_status wideattn_plan_run(const wideattn_plan* plan, const void* q, const void* k_cache, const void* v_cache,
                                  void* o, void* lse, void* stream) {
    return wideattn::guarded("wideattn_plan_run", [&] {
        wideattn::PlanObject* object = nullptr;
        const wideattn_status status = wideattn::lookup(plan, &object);
        if (status != WIDEATTN_OK) return status;
        return wideattn::run_core(object->core, wideattn::RunTensors{q, k_cache, v_cache, o, lse}, stream, false);
    });
}

wideattn_status wideattn_plan_run_tensors(const wideattn_plan* plan, const wideattn_plan_tensors* tensors,
                                          void* stream) {
    return wideattn::guarded("wideattn_plan_run_tensors",
                             [&] { return wideattn::plan_run_tensors(plan, tensors, stream); });
}

wideattn_status wideattn_plan_get_info(const wideattn_plan* plan, wideattn_plan_info* info) {
    return wideattn::guarded("wideattn_plan_get_info", [&] { return wideattn::plan_get_info(plan, info); });
}

wideattn_status wideattn_plan_destroy(wideattn_plan* plan) {
    return wideattn::guarded("wideattn_plan_destroy", [&] { return wideattn::plan_destroy(plan); });
}

}  // extern "C"
