// cli_common.cpp - see cli_common.h.
#include "tools/cli/cli_common.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "accuracy/output_path.h"
#include "dispatch/manifest_format.h"

namespace wideattn::cli {

std::string resolve_bundle_dir(const std::string& flag_value, const char* argv0) {
    (void)argv0;
    if (!flag_value.empty()) return flag_value;
    if (const char* env = std::getenv("WIDEATTN_BUNDLE"); env && *env) return env;
    return build_tree_bundle_dir();
}

bool output_writable(const char* command, const char* option, const std::string& path) {
    const std::string problem = accuracy::output_path_problem(path);
    if (problem.empty()) return true;
    std::fprintf(stderr, "wideattn %s: cannot write %s '%s': %s\n", command, option, path.c_str(), problem.c_str());
    return false;
}

bool parse_e4m3_dtype(const char* command, const std::string& option, const std::string& text, bool* e4m3) {
    if (text != "bf16" && text != "e4m3") {
        std::fprintf(stderr, "wideattn %s: %s='%s' is not bf16 or e4m3\n", command, option.c_str(), text.c_str());
        return false;
    }
    *e4m3 = text == "e4m3";
    return true;
}

wideattn_context* open_bundle(const std::string& bundle_dir, const char* command) {
    wideattn_context* ctx = nullptr;
    const wideattn_status status = wideattn_open(&ctx, bundle_dir.empty() ? nullptr : bundle_dir.c_str());
    if (status != WIDEATTN_OK) {
        std::fprintf(stderr, "wideattn %s: %s: %s\n", command, wideattn_status_string(status), wideattn_last_error());
        return nullptr;
    }
    return ctx;
}

bool parse_int(const char* command, const char* option, const char* text, long long min_value, long long max_value,
               long long* out) {
    const char* digits = text[0] == '-' ? text + 1 : text;
    bool well_formed = *digits != '\0';
    for (const char* c = digits; *c; ++c) well_formed = well_formed && *c >= '0' && *c <= '9';
    long long value = 0;
    if (well_formed) {
        char* end = nullptr;
        errno = 0;
        value = std::strtoll(text, &end, 10);
        well_formed = errno == 0 && end && *end == '\0';
    }
    if (!well_formed || value < min_value || value > max_value) {
        std::fprintf(stderr, "wideattn %s: %s='%s' is not an integer in %lld..%lld\n", command, option, text, min_value,
                     max_value);
        return false;
    }
    *out = value;
    return true;
}

const char* dtype_label(int dtype) { return dtype_name(dtype); }

bool ArgReader::is(const char* option) const { return std::strcmp(argv_[index_], option) == 0; }

bool ArgReader::has_value() const {
    return index_ + 1 < argc_ && std::strncmp(argv_[index_ + 1], "--", 2) != 0;
}

bool ArgReader::value(std::string* out) {
    if (!has_value()) {
        if (index_ + 1 < argc_)
            std::fprintf(stderr, "wideattn %s: option %s needs a value (next is option '%s')\n", command_,
                         argv_[index_], argv_[index_ + 1]);
        else
            std::fprintf(stderr, "wideattn %s: option %s needs a value\n", command_, argv_[index_]);
        return false;
    }
    ++index_;
    *out = argv_[index_];
    return true;
}

bool ArgReader::int_value(long long min_value, long long max_value, long long* out) {
    const char* option = argv_[index_];
    std::string text;
    return value(&text) && parse_int(command_, option, text.c_str(), min_value, max_value, out);
}

const char* ArgReader::optional_value() {
    if (index_ + 1 >= argc_ || argv_[index_ + 1][0] == '-') return nullptr;
    return argv_[++index_];
}

void ArgReader::report_unknown() const {
    std::fprintf(stderr, "wideattn %s: unknown argument '%s' (see --help)\n", command_, argv_[index_]);
}

}  // namespace wideattn::cli
