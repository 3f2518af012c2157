// test_gpu_plan.cpp - plans on the GPU (docs/design.md "Plans"): a plan's runs write the bits
// wideattn_prefill writes for the same call (a prefill chunk, and a split decode with its
// workspace), over caches listed at creation or not; and a run captured in a CUDA graph replays
// bit-identically, again and again, with the outputs poisoned before each replay.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/gpu/gpu_fixture.h"

using namespace wideattn;
using wideattn::test::gpu;
using wideattn::test::TestStream;

namespace {

// One problem on the device with the workspace its call wants.
struct PlanProblem {
    HostProblem host;
    DeviceProblem device;
    DeviceBuffer workspace;
};

std::string make(const ProblemSpec& spec, PlanProblem* p) {
    std::string err = make_problem(spec, &p->host);
    if (err.empty()) err = p->device.create(*gpu().device, p->host, WIDEATTN_DTYPE_BF16);
    if (!err.empty()) return err;
    wideattn_prefill_params& params = p->device.params;
    for (size_t s = 0; s < p->host.seq_lens_k.size(); ++s) {
        params.max_seqlen_q = std::max(params.max_seqlen_q, p->host.cu_seqlens_q[s + 1] - p->host.cu_seqlens_q[s]);
        params.max_seqlen_k = std::max(params.max_seqlen_k, p->host.seq_lens_k[s]);
    }
    int64_t bytes = 0;
    if (wideattn_workspace_size(gpu().ctx, &params, &bytes) != WIDEATTN_OK)
        return std::string("wideattn_workspace_size: ") + wideattn_last_error();
    if (bytes > 0) {
        if (!(err = p->workspace.allocate(*gpu().device, static_cast<size_t>(bytes))).empty()) return err;
        params.workspace = p->workspace.get();
        params.workspace_bytes = bytes;
    }
    return std::string();
}

std::string sync(CUstream stream) { return gpu().device->check(gpu().device->driver().cuStreamSynchronize(stream), "cuStreamSynchronize"); }

// o's and lse's raw bytes.
std::vector<unsigned char> outputs(const DeviceProblem& d) {
    std::vector<unsigned char> o, lse(d.lse.bytes());
    REQUIRE(d.download_raw(&o).empty());
    REQUIRE(d.lse.download(lse.data(), lse.size()).empty());
    o.insert(o.end(), lse.begin(), lse.end());
    return o;
}

const std::vector<ProblemSpec> kSpecs = {
    problem_spec({1}, {32768}, 32, 4, 16, 101),             // decode 1 x 32k: split-KV, with its workspace
    problem_spec({1, 1, 1, 1}, {256, 256, 256, 256}, 32, 4, 16, 102),
    problem_spec({700, 3}, {2000, 4095}, 32, 4, 16, 103),   // a prefill chunk and a short one
};

}  // namespace

TEST_CASE("gpu plans: runs write the bits wideattn_prefill writes, caches listed or not") {
    const TestStream s;
    REQUIRE_MESSAGE(s.error.empty(), s.error);
    for (const ProblemSpec& spec : kSpecs) {
        CAPTURE(spec.describe());
        PlanProblem p;
        REQUIRE_MESSAGE(make(spec, &p).empty(), spec.describe());
        const wideattn_prefill_params& params = p.device.params;
        REQUIRE(p.device.poison_outputs().empty());
        REQUIRE_MESSAGE(wideattn_prefill(gpu().ctx, &params, s.stream) == WIDEATTN_OK, wideattn_last_error());
        REQUIRE(sync(s.stream).empty());
        const std::vector<unsigned char> once = outputs(p.device);
        for (const bool listed : {false, true}) {
            CAPTURE(listed);
            const void* k = params.k_cache;
            const void* v = params.v_cache;
            wideattn_plan_options options{};
            options.struct_size = sizeof options;
            options.num_caches = listed ? 1 : 0;
            options.k_caches = &k;
            options.v_caches = &v;
            wideattn_plan* plan = nullptr;
            REQUIRE_MESSAGE(wideattn_plan_create(gpu().ctx, &params, &options, &plan) == WIDEATTN_OK,
                            wideattn_last_error());
            for (int run = 0; run < 3; ++run) {
                REQUIRE(p.device.poison_outputs().empty());
                REQUIRE_MESSAGE(wideattn_plan_run(plan, params.q, params.k_cache, params.v_cache, params.o, params.lse,
                                                  s.stream) == WIDEATTN_OK,
                                wideattn_last_error());
                REQUIRE(sync(s.stream).empty());
                CHECK(outputs(p.device) == once);
            }
            CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
        }
    }
}

TEST_CASE("gpu plans: a run captured in a CUDA graph replays bit-identically") {
    const Driver& drv = gpu().device->driver();
    if (!drv.cuStreamBeginCapture || !drv.cuStreamEndCapture || !drv.cuGraphInstantiate || !drv.cuGraphLaunch) {
        MESSAGE("the driver lacks the graph calls: skipped");
        return;
    }
    const TestStream s;
    REQUIRE_MESSAGE(s.error.empty(), s.error);
    for (const ProblemSpec& spec : kSpecs) {
        CAPTURE(spec.describe());
        PlanProblem p;
        REQUIRE_MESSAGE(make(spec, &p).empty(), spec.describe());
        const wideattn_prefill_params& params = p.device.params;
        wideattn_plan* plan = nullptr;
        REQUIRE_MESSAGE(wideattn_plan_create(gpu().ctx, &params, nullptr, &plan) == WIDEATTN_OK, wideattn_last_error());
        REQUIRE(p.device.poison_outputs().empty());
        REQUIRE(wideattn_plan_run(plan, params.q, params.k_cache, params.v_cache, params.o, params.lse, s.stream) ==
                WIDEATTN_OK);
        REQUIRE(sync(s.stream).empty());
        const std::vector<unsigned char> eager = outputs(p.device);

        CUgraph graph = nullptr;
        CUgraphExec exec = nullptr;
        REQUIRE(gpu().device->check(drv.cuStreamBeginCapture(s.stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                                    "cuStreamBeginCapture").empty());
        const wideattn_status captured =
            wideattn_plan_run(plan, params.q, params.k_cache, params.v_cache, params.o, params.lse, s.stream);
        const std::string captured_error = captured == WIDEATTN_OK ? "" : wideattn_last_error();
        REQUIRE(gpu().device->check(drv.cuStreamEndCapture(s.stream, &graph), "cuStreamEndCapture").empty());
        REQUIRE_MESSAGE(captured == WIDEATTN_OK, captured_error);
        REQUIRE(gpu().device->check(drv.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate").empty());
        for (int replay = 0; replay < 3; ++replay) {
            REQUIRE(p.device.poison_outputs().empty());
            REQUIRE(gpu().device->check(drv.cuGraphLaunch(exec, s.stream), "cuGraphLaunch").empty());
            REQUIRE(sync(s.stream).empty());
            CHECK(outputs(p.device) == eager);
        }
        // The plan may go once captured: the graph holds the arguments and tensor maps by value.
        CHECK(wideattn_plan_destroy(plan) == WIDEATTN_OK);
        REQUIRE(p.device.poison_outputs().empty());
        REQUIRE(gpu().device->check(drv.cuGraphLaunch(exec, s.stream), "cuGraphLaunch").empty());
        REQUIRE(sync(s.stream).empty());
        CHECK(outputs(p.device) == eager);
        if (drv.cuGraphExecDestroy) drv.cuGraphExecDestroy(exec);
        if (drv.cuGraphDestroy) drv.cuGraphDestroy(graph);
    }
}
