// test_dependent_launch.cpp - programmatic dependent launch of the split-KV merge kernel on the
// CPU (dispatch/dependent_launch.h): the WIDEATTN_PDL values and their message, wideattn_open's
// refusal of a bad one, and the decision (the context's switch, cuLaunchKernelEx, the merge
// cubin's arch). The launches themselves are tested through the fake driver (tests/test_plan.cpp).
#include <doctest/doctest.h>

#include <string>

#include "dispatch/dependent_launch.h"
#include "tests/test_helpers.h"
#include "wideattn.h"

using namespace wideattn;

namespace {

constexpr int kSm89Major = 8;
constexpr int kSm90Major = 9;
constexpr int kSm120Major = 12;

}  // namespace

TEST_CASE("dependent launch: WIDEATTN_PDL values") {
    bool on = false;
    std::string message;
    for (const char* good_on : {static_cast<const char*>(nullptr), "", "1"}) {
        on = false;
        CHECK(parse_pdl_env(good_on, &on, &message));
        CHECK(on);
    }
    CHECK(parse_pdl_env("0", &on, &message));
    CHECK_FALSE(on);
    for (const char* bad : {"off", "2", " 0", "false", "00"}) {
        CHECK_FALSE(parse_pdl_env(bad, &on, &message));
        CHECK(message == std::string("WIDEATTN_PDL=") + bad +
                             " is not 0 or 1 (0 launches the split-KV merge kernel after the split kernel without "
                             "programmatic dependent launch; unset, empty or 1 uses it on sm_90 and later)");
    }
}

TEST_CASE("dependent launch: only sm_90 and later merge cubins, with cuLaunchKernelEx, when the context allows it") {
    CHECK(programmatic_merge_launch(true, true, kSm90Major));
    CHECK(programmatic_merge_launch(true, true, kSm120Major));
    CHECK_FALSE(programmatic_merge_launch(true, true, kSm89Major));   // no griddepcontrol before sm_90
    CHECK_FALSE(programmatic_merge_launch(true, false, kSm90Major));  // cuLaunchKernel takes no attributes
    CHECK_FALSE(programmatic_merge_launch(false, true, kSm90Major));  // WIDEATTN_PDL=0
    CHECK_FALSE(programmatic_merge_launch(false, true, kSm120Major));
    CHECK(kPdlMinArchMajor == kSm90Major);
}

TEST_CASE("dependent launch: wideattn_open refuses a bad WIDEATTN_PDL, naming it") {
    wideattn_context* ctx = nullptr;
    {
        const test::ScopedEnv env(kPdlEnv, "yes");
        CHECK(wideattn_open(&ctx, test::built_bundle().c_str()) == WIDEATTN_ERROR_INVALID_ARGUMENT);
        CHECK(ctx == nullptr);
        CHECK(std::string(wideattn_last_error()).find("WIDEATTN_PDL=yes is not 0 or 1") == 0);
    }
    for (const char* good : {"1", "0", ""}) {
        const test::ScopedEnv env(kPdlEnv, good);
        REQUIRE_MESSAGE(wideattn_open(&ctx, test::built_bundle().c_str()) == WIDEATTN_OK, wideattn_last_error());
        wideattn_close(ctx);
    }
}
