// manifest_gen.cpp - writes build/bundle/manifest.json at build time.
//
// For every (kernel, arch, cubin, resources, priority) entry given on the command line it takes
// the kernel's KernelDesc from the same traits headers the kernel was compiled with (the kernel
// must be in the bundle's kernel table, kernel_table.h, generated from bundle/meson.build), the
// cubin's selection priority as the table gives it for that arch (its priority, or its
// arch_priority for the arch), the ptxas resource numbers from the build, and the cubin's size and
// FNV-1a hash (so the loader can detect a truncated or corrupt cubin).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "dispatch/manifest_format.h"
#include "kernel_table.h"

namespace {

using wideattn::KernelDesc;
using wideattn::same_text;

// The table and the traits cannot disagree: every entry's name, symbol and lowest arch are its
// KernelDesc's, and its priority is in the manifest's range.
#define WIDEATTN_CHECK_ENTRY(traits, kernel_name, kernel_symbol, kernel_min_sm, kernel_priority, kernel_split)  \
    static_assert(same_text(traits::desc.name, kernel_name), "bundle table: name is not " #traits "::desc's");   \
    static_assert(same_text(traits::desc.symbol, kernel_symbol), "bundle table: symbol is not " #traits "::desc's"); \
    static_assert(traits::desc.min_sm == kernel_min_sm, "bundle table: min_sm is not " #traits "::desc's");       \
    static_assert(same_text(traits::desc.split_symbol ? traits::desc.split_symbol : "", kernel_split),            \
                  "bundle table: split_symbol is not " #traits "::desc's");                                       \
    static_assert(kernel_priority >= 0 && kernel_priority <= wideattn::kManifestPriorityMax,                      \
                  "bundle table: priority out of range");
WIDEATTN_FOR_EACH_KERNEL(WIDEATTN_CHECK_ENTRY)
#undef WIDEATTN_CHECK_ENTRY

// The KernelDesc of the table's kernel called `name`, or nullptr.
const KernelDesc* find_desc(const std::string& name) {
    static const KernelDesc* const all[] = {
#define WIDEATTN_TABLE_ENTRY(traits, kernel_name, kernel_symbol, kernel_min_sm, kernel_priority, kernel_split) \
    &traits::desc,
        WIDEATTN_FOR_EACH_KERNEL(WIDEATTN_TABLE_ENTRY)
#undef WIDEATTN_TABLE_ENTRY
    };
    for (const KernelDesc* desc : all)
        if (name == desc->name) return desc;
    return nullptr;
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string base_name(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool read_resources(const std::string& path, std::map<std::string, long>* out) {
    std::ifstream in(path);
    if (!in) return false;
    std::string line;
    while (std::getline(in, line)) {
        const size_t eq = line.find('=');
        if (eq == std::string::npos) continue;
        (*out)[line.substr(0, eq)] = std::stol(line.substr(eq + 1));
    }
    return true;
}

std::string features_json(const char* features) {
    std::string out = "[";
    std::stringstream list(features);
    std::string item;
    bool first = true;
    while (std::getline(list, item, ',')) {
        out += (first ? "" : ", ") + json_string(item);
        first = false;
    }
    return out + "]";
}

int usage() {
    std::fprintf(stderr,
                 "usage: manifest_gen --out FILE --version V [--entry NAME ARCH CUBIN RESOURCES PRIORITY]...\n");
    return 2;
}

// One --entry: a kernel of the table built for one arch, and that cubin's selection priority.
struct Entry {
    std::string name, arch, cubin, resources;
    int32_t priority = 0;
};

// Parses an entry's PRIORITY: a whole number in 0..kManifestPriorityMax.
bool parse_priority(const std::string& text, int32_t* out) {
    char* end = nullptr;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value < 0 || value > wideattn::kManifestPriorityMax) return false;
    *out = static_cast<int32_t>(value);
    return true;
}

// Appends the manifest object of `e` to `json`; false (after printing why) when the kernel is not
// in the table or its cubin or resources cannot be read.
bool write_kernel(const Entry& e, std::ostringstream& json) {
    const KernelDesc* d = find_desc(e.name);
    if (!d) {
        std::fprintf(stderr, "manifest_gen: kernel '%s' is not in the kernel table (bundle/meson.build)\n",
                     e.name.c_str());
        return false;
    }
    std::ifstream cubin(e.cubin, std::ios::binary);
    if (!cubin) {
        std::fprintf(stderr, "manifest_gen: cannot read cubin '%s'\n", e.cubin.c_str());
        return false;
    }
    const std::string bytes((std::istreambuf_iterator<char>(cubin)), std::istreambuf_iterator<char>());
    std::map<std::string, long> res;
    if (!read_resources(e.resources, &res)) {
        std::fprintf(stderr, "manifest_gen: cannot read resources '%s'\n", e.resources.c_str());
        return false;
    }
    char hash[24];
    std::snprintf(hash, sizeof hash, "%016llx",
                  static_cast<unsigned long long>(wideattn::fnv1a64(bytes.data(), bytes.size())));
    json << "\n    {\n"
         << "      \"name\": " << json_string(d->name) << ",\n"
         << "      \"symbol\": " << json_string(d->symbol) << ",\n"
         << "      \"kind\": " << json_string(d->kind) << ",\n"
         << "      \"priority\": " << e.priority << ",\n"
         << "      \"arch\": " << json_string(e.arch) << ",\n"
         << "      \"cubin\": " << json_string(base_name(e.cubin)) << ",\n"
         << "      \"cubin_bytes\": " << bytes.size() << ",\n"
         << "      \"cubin_fnv1a64\": " << json_string(hash) << ",\n"
         << "      \"q_dtype\": " << json_string(wideattn::dtype_name(d->q_dtype)) << ",\n"
         << "      \"kv_dtype\": " << json_string(wideattn::dtype_name(d->kv_dtype)) << ",\n"
         << "      \"o_dtype\": " << json_string(wideattn::dtype_name(d->o_dtype)) << ",\n"
         << "      \"head_dim\": {\"min\": " << d->head_dim_min << ", \"max\": " << d->head_dim_max
         << ", \"step\": " << d->head_dim_step << "},\n"
         << "      \"group\": {\"min\": " << d->group_min << ", \"max\": " << d->group_max << "},\n"
         << "      \"tile\": {\"tokens\": " << d->tile_tokens << ", \"keys\": " << d->tile_keys
         << ", \"heads\": " << d->heads_per_block_max << "},\n"
         << "      \"threads\": " << d->threads << ",\n"
         << "      \"dynamic_smem\": " << d->dynamic_smem << ",\n"
         << "      \"min_sm\": " << d->min_sm << ",\n"
         << "      \"features\": " << features_json(d->features) << ",\n"
         << "      \"ptxas\": {\"registers\": " << res["registers"] << ", \"spill_stores\": "
         << res["spill_stores"] << ", \"spill_loads\": " << res["spill_loads"] << ", \"stack\": "
         << res["stack"] << "}";
    if (d->split_symbol)
        json << ",\n      \"split_symbol\": " << json_string(d->split_symbol) << ",\n"
             << "      \"split_ptxas\": {\"registers\": " << res["split_registers"] << ", \"spill_stores\": "
             << res["split_spill_stores"] << ", \"spill_loads\": " << res["split_spill_loads"] << ", \"stack\": "
             << res["split_stack"] << "}";
    json << "\n    }";
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    std::string out_path, version;
    std::vector<Entry> entries;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--out" && i + 1 < argc) {
            out_path = argv[++i];
        } else if (arg == "--version" && i + 1 < argc) {
            version = argv[++i];
        } else if (arg == "--entry" && i + 5 < argc) {
            Entry entry{argv[i + 1], argv[i + 2], argv[i + 3], argv[i + 4]};
            if (!parse_priority(argv[i + 5], &entry.priority)) {
                std::fprintf(stderr, "manifest_gen: --entry %s %s: PRIORITY='%s' is not an integer in 0..%d\n",
                             argv[i + 1], argv[i + 2], argv[i + 5], wideattn::kManifestPriorityMax);
                return 2;
            }
            entries.push_back(entry);
            i += 5;
        } else {
            std::fprintf(stderr, "manifest_gen: unexpected argument '%s'\n", arg.c_str());
            return usage();
        }
    }
    if (out_path.empty()) return usage();

    std::ostringstream json;
    json << "{\n  \"format\": " << wideattn::kManifestFormatVersion << ",\n  \"library_version\": "
         << json_string(version) << ",\n  \"kernels\": [";
    for (size_t k = 0; k < entries.size(); ++k) {
        if (k) json << ",";
        if (!write_kernel(entries[k], json)) return 1;
    }
    json << "\n  ]\n}\n";
    std::ofstream out(out_path);
    out << json.str();
    if (!out) {
        std::fprintf(stderr, "manifest_gen: cannot write '%s'\n", out_path.c_str());
        return 1;
    }
    return 0;
}
