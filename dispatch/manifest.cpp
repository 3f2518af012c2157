// manifest.cpp - reads and checks manifest.json (see manifest.h).
#include "dispatch/manifest.h"

#include <set>
#include <sstream>
#include <utility>

#include "dispatch/bundle_files.h"
#include "dispatch/json.h"
#include "dispatch/manifest_format.h"
#include "kernels/common/k_from_v.h"
#include "kernels/common/kernel_desc.h"
#include "kernels/common/kv_tensor_map.h"

namespace wideattn {
namespace {

constexpr int32_t kMaxThreadsPerBlock = 1024;
constexpr int32_t kMaxSmemBytes = 256 * 1024;
constexpr int64_t kMaxCubinBytes = int64_t{1} << 40;
constexpr int32_t kMaxPtxasBytes = 1 << 30;        // spill and stack byte counts
constexpr size_t kChecksumDigits = 16;             // cubin_fnv1a64: 64 bits in hex

class KernelReader {
public:
    KernelReader(const JsonValue& node, size_t index) : node_(node), index_(index) {}

    bool string(const char* key, std::string* out) {
        const JsonValue* v = node_.find(key);
        if (!v || v->type != JsonValue::Type::kString) return fail(key, "a string");
        *out = v->string;
        return true;
    }
    // An integer field: a JSON number written as an integer (no fraction or exponent) within
    // lo..hi, so it converts exactly into its field.
    bool integer(const JsonValue& parent, const char* key, const char* path, int64_t lo, int64_t hi, int64_t* out) {
        const JsonValue* v = parent.find(key);
        if (v && v->type == JsonValue::Type::kNumber && v->is_integer && v->integer >= lo && v->integer <= hi) {
            *out = v->integer;
            return true;
        }
        std::ostringstream what;
        what << "an integer in " << lo << ".." << hi << " (" << describe(v) << ")";
        return fail(path, what.str().c_str());
    }
    bool int32(const JsonValue& parent, const char* key, const char* path, int64_t lo, int64_t hi, int32_t* out) {
        int64_t value = 0;
        if (!integer(parent, key, path, lo, hi, &value)) return false;
        *out = static_cast<int32_t>(value);
        return true;
    }
    const JsonValue* object(const char* key) {
        const JsonValue* v = node_.find(key);
        if (!v || v->type != JsonValue::Type::kObject) {
            fail(key, "an object");
            return nullptr;
        }
        return v;
    }
    bool dtype(const char* key, int32_t* out) {
        std::string name;
        if (!string(key, &name)) return false;
        *out = dtype_from_name(name.c_str());
        if (*out < 0) return fail(key, "a dtype name (bf16, f16, f32, f64, e4m3)");
        return true;
    }
    // What a field holds, for a message: "not 2.5", "not a string", "missing".
    static std::string describe(const JsonValue* v) {
        if (!v) return "it is missing";
        switch (v->type) {
            case JsonValue::Type::kNumber: return "not " + v->literal;
            case JsonValue::Type::kString: return "not the string " + json_quoted(v->string);
            case JsonValue::Type::kBool: return v->boolean ? "not true" : "not false";
            case JsonValue::Type::kNull: return "not null";
            case JsonValue::Type::kArray: return "not an array";
            case JsonValue::Type::kObject: return "not an object";
        }
        return "not of a known type";
    }
    bool fail(const char* field, const char* expected) {
        std::ostringstream msg;
        msg << "kernels[" << index_ << "]";
        if (const JsonValue* name = node_.find("name"); name && name->type == JsonValue::Type::kString)
            msg << " (" << name->string << ")";
        msg << ": field '" << field << "' must be " << expected;
        error = msg.str();
        return false;
    }
    const JsonValue& node() const { return node_; }
    std::string error;

private:
    const JsonValue& node_;
    size_t index_;
};

// The typed fields of one kernel entry, each checked for type and range; false at the first
// that is not (r.error names it).
bool read_fields(KernelReader& r, const JsonValue& node, ManifestKernel* k) {
    const JsonValue* head_dim = nullptr;
    const JsonValue* group = nullptr;
    const JsonValue* tile = nullptr;
    const JsonValue* ptxas = nullptr;
    int64_t cubin_bytes = 0;
    const bool ok =
        r.string("name", &k->name) && r.string("symbol", &k->symbol) && r.string("kind", &k->kind) &&
        r.int32(node, "priority", "priority", 0, kManifestPriorityMax, &k->priority) && r.string("arch", &k->arch) &&
        r.string("cubin", &k->cubin) && r.string("cubin_fnv1a64", &k->cubin_fnv1a64) &&
        r.integer(node, "cubin_bytes", "cubin_bytes", 1, kMaxCubinBytes, &cubin_bytes) &&
        r.dtype("q_dtype", &k->q_dtype) && r.dtype("kv_dtype", &k->kv_dtype) && r.dtype("o_dtype", &k->o_dtype) &&
        (head_dim = r.object("head_dim")) && r.int32(*head_dim, "min", "head_dim.min", 1, 4096, &k->head_dim_min) &&
        r.int32(*head_dim, "max", "head_dim.max", 1, 4096, &k->head_dim_max) &&
        r.int32(*head_dim, "step", "head_dim.step", 1, 4096, &k->head_dim_step) && (group = r.object("group")) &&
        r.int32(*group, "min", "group.min", 1, 1 << 20, &k->group_min) &&
        r.int32(*group, "max", "group.max", 1, 1 << 20, &k->group_max) && (tile = r.object("tile")) &&
        r.int32(*tile, "tokens", "tile.tokens", 1, 4096, &k->tile_tokens) &&
        r.int32(*tile, "keys", "tile.keys", 1, 4096, &k->tile_keys) &&
        r.int32(*tile, "heads", "tile.heads", 1, 1024, &k->heads_per_block_max) &&
        r.int32(node, "threads", "threads", 32, kMaxThreadsPerBlock, &k->threads) &&
        r.int32(node, "dynamic_smem", "dynamic_smem", 0, kMaxSmemBytes, &k->dynamic_smem) &&
        r.int32(node, "min_sm", "min_sm", 10, 1000, &k->min_sm) && (ptxas = r.object("ptxas")) &&
        r.int32(*ptxas, "registers", "ptxas.registers", -1, 255, &k->registers) &&
        r.int32(*ptxas, "spill_stores", "ptxas.spill_stores", -1, kMaxPtxasBytes, &k->spill_stores) &&
        r.int32(*ptxas, "spill_loads", "ptxas.spill_loads", -1, kMaxPtxasBytes, &k->spill_loads) &&
        r.int32(*ptxas, "stack", "ptxas.stack", -1, kMaxPtxasBytes, &k->stack);
    k->cubin_bytes = static_cast<uint64_t>(cubin_bytes);
    return ok;
}

bool is_checksum_text(const std::string& text) {
    if (text.size() != kChecksumDigits) return false;
    for (const char c : text)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

// The checks across fields of an entry whose fields read_fields accepted.
bool check_kernel(KernelReader& r, ManifestKernel* k) {
    if (k->name.empty()) return r.fail("name", "a non-empty string");
    if (k->symbol.empty()) return r.fail("symbol", "a non-empty string");
    if (!parse_arch(k->arch, &k->arch_major, &k->arch_minor, &k->arch_specific))
        return r.fail("arch", "of the form sm_NN or sm_NNa");
    if (k->kind != kKindPrefill && k->kind != kKindMergeSplits && k->kind != kKindQuantizeE4m3 &&
        k->kind != kKindAmaxE4m3 && k->kind != kKindKFromVRebuild)
        return r.fail("kind",
                      "\"prefill\", \"merge_splits\", \"quantize_e4m3\", \"amax_e4m3\" or \"k_from_v_rebuild\"");
    if (k->cubin.empty() || k->cubin.find('/') != std::string::npos || k->cubin[0] == '.')
        return r.fail("cubin", "a plain file name inside the bundle directory");
    if (!is_checksum_text(k->cubin_fnv1a64))
        return r.fail("cubin_fnv1a64", ("16 lowercase hex digits (not " + json_quoted(k->cubin_fnv1a64) + ")").c_str());
    if (k->head_dim_min > k->head_dim_max || k->group_min > k->group_max)
        return r.fail("head_dim/group", "ranges with min <= max");
    if (k->spill_stores < 0 || k->spill_loads < 0) {
        k->spill_bytes = -1;
    } else if (__builtin_add_overflow(k->spill_stores, k->spill_loads, &k->spill_bytes)) {
        return r.fail("ptxas.spill_stores + ptxas.spill_loads", "at most 2147483647 bytes");
    }
    return true;
}

// The "features" array of strings.
bool read_features(KernelReader& r, const JsonValue& node, ManifestKernel* k) {
    const JsonValue* features = node.find("features");
    if (!features || features->type != JsonValue::Type::kArray) return r.fail("features", "an array of strings");
    for (const JsonValue& f : features->array) {
        if (f.type != JsonValue::Type::kString) return r.fail("features", "an array of strings");
        k->features.push_back(f.string);
        k->features_csv += (k->features_csv.empty() ? "" : ",") + f.string;
    }
    // A prefill kernel takes at most one second argument: the K/V tensor maps or the K-from-V
    // description.
    if (k->has_feature(kFeatureTmaKv) && k->has_feature(kFeatureKFromV))
        return r.fail("features", "not both \"tma_kv\" and \"k_from_v\" (each is a second kernel argument)");
    // Clusters exist from sm_90 on.
    if (k->has_feature(kFeatureCtaPair) && k->min_sm < kMinSmClusters)
        return r.fail("features", ("\"cta_pair\" only with min_sm >= " + std::to_string(kMinSmClusters) +
                                   " (thread-block clusters), not " + std::to_string(k->min_sm)).c_str());
    // "power_of_two" tells the two amax kernels apart; no other kind has such a variant.
    if (k->has_feature(kFeaturePowerOfTwo) && k->kind != kKindAmaxE4m3)
        return r.fail("features", "\"power_of_two\" only on a kernel of kind \"amax_e4m3\"");
    // "k_from_v_only" narrows a K-from-V kernel to the calls with the flag.
    if (k->has_feature(kFeatureKFromVOnly) && !k->has_feature(kFeatureKFromV))
        return r.fail("features", "\"k_from_v_only\" needs \"k_from_v\" (a kernel that rebuilds K from V)");
    return true;
}

// The optional split-KV entry: "split_symbol" (a string) with "split_ptxas" (as "ptxas"), present
// exactly when the features list "split_kv".
bool read_split_entry(KernelReader& r, const JsonValue& node, ManifestKernel* k) {
    const bool splits = k->has_feature("split_kv");
    if (!node.find("split_symbol")) {
        if (splits) return r.fail("split_symbol", "present: the features list \"split_kv\"");
        return !node.find("split_ptxas") || r.fail("split_ptxas", "absent without a split_symbol");
    }
    const JsonValue* ptxas = nullptr;
    int32_t stores = -1, loads = -1, stack = -1;
    if (!(r.string("split_symbol", &k->split_symbol) && (ptxas = r.object("split_ptxas")) &&
          r.int32(*ptxas, "registers", "split_ptxas.registers", -1, 255, &k->split_registers) &&
          r.int32(*ptxas, "spill_stores", "split_ptxas.spill_stores", -1, kMaxPtxasBytes, &stores) &&
          r.int32(*ptxas, "spill_loads", "split_ptxas.spill_loads", -1, kMaxPtxasBytes, &loads) &&
          r.int32(*ptxas, "stack", "split_ptxas.stack", -1, kMaxPtxasBytes, &stack)))
        return false;
    if (k->split_symbol.empty() || k->split_symbol == k->symbol)
        return r.fail("split_symbol", "a non-empty string other than symbol");
    if (!splits) return r.fail("split_symbol", "absent: the features do not list \"split_kv\"");
    k->split_spill_bytes = stores < 0 || loads < 0 ? -1 : (stores > INT32_MAX - loads ? INT32_MAX : stores + loads);
    return true;
}

bool read_kernel(const JsonValue& node, size_t index, ManifestKernel* k, std::string* error) {
    if (node.type != JsonValue::Type::kObject) {
        *error = "kernels[" + std::to_string(index) + "] is not an object";
        return false;
    }
    KernelReader r(node, index);
    if (read_fields(r, node, k) && check_kernel(r, k) && read_features(r, node, k) && read_split_entry(r, node, k))
        return true;
    *error = r.error;
    return false;
}

// The top-level "format" field: exactly kManifestFormatVersion.
bool check_format(const JsonValue& root, std::string* error) {
    const JsonValue* format = root.find("format");
    if (!format || format->type != JsonValue::Type::kNumber) {
        *error = "manifest.json: missing numeric field 'format'";
        return false;
    }
    if (!format->is_integer || format->integer != kManifestFormatVersion) {
        *error = "manifest.json: format " + format->literal + " is not the supported format " +
                 std::to_string(kManifestFormatVersion);
        return false;
    }
    return true;
}

}  // namespace

bool ManifestKernel::has_feature(const std::string& feature) const {
    for (const std::string& f : features)
        if (f == feature) return true;
    return false;
}

int32_t ManifestKernel::ctas_per_tile() const { return has_feature(kFeatureCtaPair) ? kCtaPairSize : 1; }

bool parse_arch(const std::string& arch, int32_t* major, int32_t* minor, bool* arch_specific) {
    if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return false;
    std::string digits = arch.substr(3);
    *arch_specific = !digits.empty() && digits.back() == 'a';
    if (*arch_specific) digits.pop_back();
    if (digits.size() < 2 || digits.size() > 3 || digits[0] == '0') return false;  // major >= 1
    for (char c : digits)
        if (c < '0' || c > '9') return false;
    const int value = std::stoi(digits);
    *major = value / 10;
    *minor = value % 10;
    return true;
}

bool parse_manifest(const std::string& text, Manifest* out, std::string* error) {
    JsonValue root;
    std::string json_error;
    if (!parse_json(text, &root, &json_error)) {
        *error = "manifest.json is not valid JSON (" + json_error + ")";
        return false;
    }
    if (root.type != JsonValue::Type::kObject) {
        *error = "manifest.json: the top level is not an object";
        return false;
    }
    if (!check_format(root, error)) return false;
    const JsonValue* kernels = root.find("kernels");
    if (!kernels || kernels->type != JsonValue::Type::kArray) {
        *error = "manifest.json: missing array field 'kernels'";
        return false;
    }
    Manifest m;
    m.format = kManifestFormatVersion;
    if (const JsonValue* v = root.find("library_version")) {
        if (v->type != JsonValue::Type::kString) {
            *error = "manifest.json: field 'library_version' must be a string";
            return false;
        }
        m.library_version = v->string;
    }
    std::set<std::pair<std::string, std::string>> seen;  // (name, arch)
    for (size_t i = 0; i < kernels->array.size(); ++i) {
        ManifestKernel k;
        std::string kernel_error;
        if (!read_kernel(kernels->array[i], i, &k, &kernel_error)) {
            *error = "manifest.json: " + kernel_error;
            return false;
        }
        if (!seen.emplace(k.name, k.arch).second) {
            *error = "manifest.json: kernels[" + std::to_string(i) + "] (" + k.name + "): a second entry for " +
                     k.name + " on " + k.arch + " (each (name, arch) pair appears once)";
            return false;
        }
        m.kernels.push_back(std::move(k));
    }
    *out = std::move(m);
    return true;
}

bool load_manifest(const std::string& bundle_dir, Manifest* out, std::string* error) {
    const std::string path = bundle_dir + "/" + kManifestFileName;
    std::string text, read_error;
    if (!read_regular_file(path, kMaxManifestBytes, &text, &read_error)) {
        *error = read_error + " (is bundle_dir '" + bundle_dir + "' a wideattn bundle?)";
        return false;
    }
    std::string parse_error;
    if (!parse_manifest(text, out, &parse_error)) {
        *error = path + ": " + parse_error;
        return false;
    }
    return true;
}

}  // namespace wideattn
