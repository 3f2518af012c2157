// gpu_fixture.h - the GPU suite's shared fixture: device 0's primary context and a context on
// the bundle ($WIDEATTN_BUNDLE, else the build tree's bundle beside the test binary, else the
// installed one; tuning files off unless WIDEATTN_TUNING is set), opened once per process, with a
// kernel restriction and a stream of that context for one scope. Without a driver or GPU the
// suite exits 77 (meson's "skipped") after printing why.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "tools/harness/bundle_dir.h"
#include "tools/harness/device_problem.h"
#include "wideattn.h"

namespace wideattn::test {

constexpr int kSkipExitCode = 77;

// Where $WIDEATTN_BUNDLE is unset or empty: sets it to the build tree's bundle beside the test
// binary (build_tree_bundle_dir, as the CLI looks it up) when there is one, so the suite and every
// context its tests open read the bundle built beside it; else leaves the library's default (the
// installed bundle).
inline void default_to_build_bundle() {
    if (const char* env = std::getenv("WIDEATTN_BUNDLE"); env && *env) return;
    if (const std::string bundle = build_tree_bundle_dir(); !bundle.empty()) setenv("WIDEATTN_BUNDLE", bundle.c_str(), 1);
}

struct GpuFixture {
    std::unique_ptr<GpuDevice> device;
    wideattn_context* ctx = nullptr;
};

inline GpuFixture& gpu() {
    static GpuFixture fixture = [] {
        GpuFixture made;
        wideattn_status status;
        std::string error;
        made.device = GpuDevice::open(0, &status, &error);
        if (!made.device) {
            std::printf("GPU suite skipped: %s: %s\n", wideattn_status_string(status), error.c_str());
            std::exit(kSkipExitCode);
        }
        // A tuning file beside the bundle (`wideattn tune`) must not change what the suite runs;
        // the tuning tests open their own contexts on their own files.
        setenv("WIDEATTN_TUNING", "off", 0);
        default_to_build_bundle();
        if (wideattn_open(&made.ctx, nullptr) != WIDEATTN_OK) {
            std::printf("cannot open bundle: %s\n", wideattn_last_error());
            std::exit(1);
        }
        const char* bundle = std::getenv("WIDEATTN_BUNDLE");
        std::printf("GPU suite on %s (sm_%d%d), bundle %s\n", made.device->name().c_str(), made.device->cc_major(),
                    made.device->cc_minor(), bundle && *bundle ? bundle : "(the installed one)");
        return made;
    }();
    return fixture;
}

// Restricts the suite's context to one kernel for the lifetime of the object.
struct KernelRestriction {
    explicit KernelRestriction(const std::string& name) {
        REQUIRE_MESSAGE(wideattn_set_prefill_kernel(gpu().ctx, name.c_str()) == WIDEATTN_OK, wideattn_last_error());
    }
    ~KernelRestriction() { wideattn_set_prefill_kernel(gpu().ctx, nullptr); }
};

// A stream of the suite's context, destroyed with the object.
struct TestStream {
    CUstream stream = nullptr;
    std::string error;
    TestStream() { error = gpu().device->check(gpu().device->driver().cuStreamCreate(&stream, 0), "cuStreamCreate"); }
    ~TestStream() {
        if (stream) gpu().device->driver().cuStreamDestroy(stream);
    }
};

}  // namespace wideattn::test
