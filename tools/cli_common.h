// cli_common.h - small helpers shared by the `wideattn` subcommands: bundle lookup and
// argument parsing with clear errors.
#pragma once

#include <string>

#include "wideattn.h"

namespace wideattn::cli {

// Bundle directory for a subcommand: --bundle if given, else $WIDEATTN_BUNDLE, else the
// build tree's bundle next to this executable (../bundle), else the installed default (NULL).
std::string resolve_bundle_dir(const std::string& flag_value, const char* argv0);

// Directory of the running executable ("" if unknown).
std::string executable_dir();

// Opens the context or prints "wideattn <cmd>: <status>: <message>" and returns nullptr.
wideattn_context* open_bundle(const std::string& bundle_dir, const char* command);

// Parses a non-negative integer option value; prints an error naming the option on failure.
bool parse_int(const char* command, const char* option, const char* text, long long min_value, long long* out);

const char* dtype_label(int dtype);

}  // namespace wideattn::cli
