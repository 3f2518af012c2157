// c_boundary.cpp - see c_boundary.h.
#include "dispatch/c_boundary.h"

#include <cstdio>
#include <utility>

namespace wideattn {
namespace {

constexpr size_t kFixedMessageBytes = 512;

// The message of the last failed call: a string, or (after an exception, when allocating may be
// what failed) a fixed buffer.
thread_local std::string t_message;
thread_local char t_fixed[kFixedMessageBytes];
thread_local bool t_use_fixed = false;

}  // namespace

wideattn_status fail(wideattn_status status, std::string message) noexcept {
    t_message = std::move(message);
    t_use_fixed = false;
    return status;
}

const char* last_error_text() noexcept { return t_use_fixed ? t_fixed : t_message.c_str(); }

wideattn_status fail_from_exception(const char* function, const char* kind, const char* what) noexcept {
    if (what)
        std::snprintf(t_fixed, sizeof t_fixed, "%s: %s: %s", function, kind, what);
    else
        std::snprintf(t_fixed, sizeof t_fixed, "%s: %s", function, kind);
    t_use_fixed = true;
    return WIDEATTN_ERROR_INTERNAL;
}

}  // namespace wideattn
