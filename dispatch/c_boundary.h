// c_boundary.h - the C ABI boundary of libwideattn: the thread-local last-error message, and
// guarded(), which every exported function that can throw runs its body through, so that no C++
// exception (a stream failure, std::bad_alloc, a library bug) ever unwinds into the C caller.
// An exception becomes WIDEATTN_ERROR_INTERNAL with a message naming the function.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "wideattn.h"

namespace wideattn {

// Sets the calling thread's wideattn_last_error() and returns `status`. Never throws (the
// message was built by the caller, inside its guarded body).
wideattn_status fail(wideattn_status status, std::string message) noexcept;

// The calling thread's last error message ("" if none).
const char* last_error_text() noexcept;

// Records an exception that reached the boundary of `function` (what: its what(), or null) and
// returns WIDEATTN_ERROR_INTERNAL. Builds the message without allocating.
wideattn_status fail_from_exception(const char* function, const char* kind, const char* what) noexcept;

// Runs `body` (returning wideattn_status) and turns every exception it throws into
// WIDEATTN_ERROR_INTERNAL: "FUNCTION: out of host memory", "FUNCTION: unexpected exception: WHAT"
// or "FUNCTION: unexpected exception of an unknown type".
template <typename Body>
wideattn_status guarded(const char* function, Body&& body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return fail_from_exception(function, "out of host memory", nullptr);
    } catch (const std::exception& e) {
        return fail_from_exception(function, "unexpected exception", e.what());
    } catch (...) {
        return fail_from_exception(function, "unexpected exception of an unknown type", nullptr);
    }
}

}  // namespace wideattn
