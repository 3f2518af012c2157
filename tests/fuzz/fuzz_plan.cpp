// fuzz_plan.cpp - libFuzzer target of plans (wideattn_plan_create / _run / _run_tensors /
// _get_info / _destroy) through the stand-in driver, built with -Dfuzz=true under ASan and UBSan:
// each input is a program of plan calls (plan_fuzz_check.h) over fuzzed params, options, run
// tensors and handles, forged and stale ones included; an invariant broken traps, a crash or a
// use after free aborts under the sanitizers. tests/fuzz/README.md has the command to run it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/plan_fuzz_check.h"

namespace {

wideattn_context* g_ctx = nullptr;

}  // namespace

// The stand-in driver and the build's bundle unless the environment names others.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
    setenv("WIDEATTN_LIBCUDA", WIDEATTN_FUZZ_FAKE_CUDA, 0);
    setenv("WIDEATTN_BUNDLE", WIDEATTN_FUZZ_BUNDLE, 0);
    setenv("WIDEATTN_TUNING", "off", 1);
    setenv("WIDEATTN_CHECK_METADATA", "0", 1);
    if (wideattn_open(&g_ctx, nullptr) != WIDEATTN_OK) {
        std::fprintf(stderr, "fuzz_plan: wideattn_open failed: %s\n", wideattn_last_error());
        std::abort();
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string problem = wideattn::fuzz::plan_input_problem(g_ctx, data, size);
    if (!problem.empty()) {
        std::fprintf(stderr, "plan invariant broken: %s\n", problem.c_str());
        __builtin_trap();
    }
    return 0;
}
