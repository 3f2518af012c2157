// cli_common.h - what the `wideattn` subcommands share: bundle lookup and
// argument parsing with clear errors.
#pragma once

#include <climits>
#include <string>

#include "tools/harness/bundle_dir.h"
#include "wideattn.h"

namespace wideattn::cli {

// Bundle directory for a subcommand: --bundle if given, else $WIDEATTN_BUNDLE, else the
// build tree's bundle next to this executable (../bundle), else the installed default (NULL).
std::string resolve_bundle_dir(const std::string& flag_value, const char* argv0);

// executable_dir() (the running executable's directory): tools/harness/bundle_dir.h.
using wideattn::executable_dir;

// Opens the context or prints "wideattn <cmd>: <status>: <message>" and returns nullptr.
wideattn_context* open_bundle(const std::string& bundle_dir, const char* command);

// Largest CUDA device ordinal an option accepts (the driver takes an int).
constexpr long long kMaxDeviceOrdinal = INT_MAX;

// Parses the integer value `text` (not null) of `option`: an optional '-' and decimal digits,
// nothing else (no sign '+', spaces, hex or suffix), within min_value..max_value. On failure
// prints "wideattn COMMAND: OPTION='TEXT' is not an integer in MIN..MAX" and returns false.
// ArgReader::int_value reports a missing value.
bool parse_int(const char* command, const char* option, const char* text, long long min_value, long long max_value,
               long long* out);

// Reads one subcommand's arguments (argv[0] is the subcommand) in order. An option that takes a
// value and has none, because the arguments end or the next one is an option ("--..."), is
// reported as "wideattn CMD: option X needs a value" rather than as an unknown argument. Errors
// are printed; the caller returns exit status 2 when a method returns false.
class ArgReader {
  public:
    ArgReader(const char* command, int argc, char** argv) : command_(command), argc_(argc), argv_(argv) {}

    // Moves to the next argument; false after the last one.
    bool next() { return ++index_ < argc_; }
    // The current argument.
    std::string arg() const { return argv_[index_]; }
    bool is(const char* option) const;
    // Takes the value that follows the current option.
    bool value(std::string* out);
    // As value, parsed as an integer in min_value..max_value (parse_int).
    bool int_value(long long min_value, long long max_value, long long* out);
    // Takes the next argument as the value of an option whose value may be left out (e.g.
    // `--quick [N]`) when there is one that is not an option; nullptr otherwise.
    const char* optional_value();
    // Prints "wideattn CMD: unknown argument 'X' (see --help)" for the current argument.
    void report_unknown() const;

  private:
    bool has_value() const;

    const char* command_;
    int argc_;
    char** argv_;
    int index_ = 0;
};

// Whether `path`, the value of `option`, can be written (accuracy::output_path_problem), asked
// before the GPU work whose result goes there; prints "wideattn COMMAND: cannot write OPTION
// 'PATH': REASON" and returns false when not.
bool output_writable(const char* command, const char* option, const std::string& path);

const char* dtype_label(int dtype);

// The value `text` of a dtype option (--kv-dtype, --q-dtype) of `command`: "bf16" sets *e4m3
// false, "e4m3" true; anything else prints "wideattn COMMAND: OPTION='TEXT' is not bf16 or e4m3"
// and returns false.
bool parse_e4m3_dtype(const char* command, const std::string& option, const std::string& text, bool* e4m3);

}  // namespace wideattn::cli
