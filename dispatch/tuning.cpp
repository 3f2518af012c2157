// tuning.cpp - the tuning file: parsing, writing, and the per-context state (see tuning.h).
#include "dispatch/tuning.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <set>
#include <sstream>

#include "dispatch/bundle_files.h"
#include "dispatch/json.h"
#include "dispatch/manifest_format.h"
#include "dispatch/selection.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {
namespace {

constexpr int kChecksumDigits = 16;
constexpr int32_t kCcMax = 100;
constexpr double kMaxMilliseconds = 1e9;
constexpr uint64_t kMaxTuningBytes = uint64_t{64} << 20;

const char* const kShapeClassNames[] = {"decode_single", "decode", "prefill_short", "prefill_long"};
static_assert(std::size(kShapeClassNames) == std::size(kShapeClasses), "a name per shape class");

using Type = JsonValue::Type;

// Field readers that name the field on failure ("choices[2].kernel must be a string").
struct Reader {
    std::string* error;

    bool fail(const std::string& path, const std::string& expected) {
        *error = "field '" + path + "' must be " + expected;
        return false;
    }
    const JsonValue* member(const JsonValue& parent, const char* key, Type type, const std::string& path,
                            const char* expected) {
        const JsonValue* v = parent.find(key);
        if (!v || v->type != type) {
            fail(path, expected);
            return nullptr;
        }
        return v;
    }
    bool string(const JsonValue& parent, const char* key, const std::string& path, std::string* out) {
        const JsonValue* v = member(parent, key, Type::kString, path, "a string");
        if (v) *out = v->string;
        return v != nullptr;
    }
    bool integer(const JsonValue& parent, const char* key, const std::string& path, int64_t lo, int64_t hi,
                 int32_t* out) {
        // An integer literal (no fraction or exponent) within lo..hi, converted exactly.
        const JsonValue* v = parent.find(key);
        if (!v || v->type != Type::kNumber || !v->is_integer || v->integer < lo || v->integer > hi)
            return fail(path, "an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
        *out = static_cast<int32_t>(v->integer);
        return true;
    }
    bool milliseconds(const JsonValue& parent, const char* key, const std::string& path, double* out) {
        const JsonValue* v = parent.find(key);
        if (!v || v->type != Type::kNumber || !(v->number >= 0) || v->number > kMaxMilliseconds)
            return fail(path, "a number of milliseconds >= 0");
        *out = v->number;
        return true;
    }
    bool dtype(const JsonValue& parent, const char* key, const std::string& path, int32_t* out) {
        std::string name;
        if (!string(parent, key, path, &name)) return false;
        *out = dtype_from_name(name.c_str());
        return *out >= 0 || fail(path, "a dtype name (bf16, f16, f32, f64, e4m3)");
    }
};

bool read_timing(Reader& r, const JsonValue& node, const std::string& path, TuningTiming* t) {
    if (node.type != Type::kObject) return r.fail(path, "an object");
    if (!r.string(node, "kernel", path + ".kernel", &t->kernel) ||
        !r.milliseconds(node, "total_ms", path + ".total_ms", &t->total_ms))
        return false;
    const JsonValue* cases = r.member(node, "cases", Type::kArray, path + ".cases", "an array");
    if (!cases) return false;
    for (size_t i = 0; i < cases->array.size(); ++i) {
        const std::string at = path + ".cases[" + std::to_string(i) + "]";
        const JsonValue& c = cases->array[i];
        std::pair<std::string, double> entry;
        if (c.type != Type::kObject) return r.fail(at, "an object");
        if (!r.string(c, "case", at + ".case", &entry.first) ||
            !r.milliseconds(c, "median_ms", at + ".median_ms", &entry.second))
            return false;
        t->case_ms.push_back(entry);
    }
    return true;
}

bool read_choice(Reader& r, const JsonValue& node, const std::string& path, TuningChoice* c) {
    if (node.type != Type::kObject) return r.fail(path, "an object");
    std::string class_name;
    if (!r.string(node, "class", path + ".class", &class_name)) return false;
    if (!shape_class_from_name(class_name, &c->shape_class))
        return r.fail(path + ".class", "one of " + shape_class_list());
    if (!r.dtype(node, "q_dtype", path + ".q_dtype", &c->q_dtype) ||
        !r.dtype(node, "kv_dtype", path + ".kv_dtype", &c->kv_dtype) ||
        !r.string(node, "kernel", path + ".kernel", &c->kernel))
        return false;
    const JsonValue* timings = r.member(node, "timings", Type::kArray, path + ".timings", "an array");
    if (!timings) return false;
    for (size_t i = 0; i < timings->array.size(); ++i) {
        TuningTiming t;
        if (!read_timing(r, timings->array[i], path + ".timings[" + std::to_string(i) + "]", &t)) return false;
        c->timings.push_back(t);
    }
    return true;
}

bool is_checksum(const std::string& s) {
    if (s.size() != kChecksumDigits) return false;
    for (char ch : s)
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    return true;
}

bool read_header(Reader& r, const JsonValue& root, TuningFile* out) {
    const JsonValue* format = root.find("format");
    if (!format || format->type != Type::kNumber || !format->is_integer || format->integer != kTuningFormatVersion)
        return r.fail("format", std::to_string(kTuningFormatVersion));
    const JsonValue* device = r.member(root, "device", Type::kObject, "device", "an object");
    if (!device || !r.string(*device, "name", "device.name", &out->device_name) ||
        !r.integer(*device, "cc_major", "device.cc_major", 1, kCcMax, &out->cc_major) ||
        !r.integer(*device, "cc_minor", "device.cc_minor", 0, kCcMax, &out->cc_minor) ||
        !r.integer(*device, "driver_version", "device.driver_version", 0, INT32_MAX, &out->driver_version) ||
        !r.string(root, "bundle_checksum", "bundle_checksum", &out->bundle_checksum))
        return false;
    if (!is_checksum(out->bundle_checksum)) return r.fail("bundle_checksum", "16 lower-case hex digits");
    if (const JsonValue* v = root.find("library_version"); v && v->type == Type::kString) out->library_version = v->string;
    if (const JsonValue* v = root.find("date"); v && v->type == Type::kString) out->date = v->string;
    return true;
}

std::string json_text(const std::string& s) {
    std::string out = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') {
            out += '\\';
            out += ch;
        } else if (static_cast<unsigned char>(ch) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", ch);
            out += buf;
        } else {
            out += ch;
        }
    }
    return out + "\"";
}

std::string ms_text(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", ms);
    return buf;
}

std::string choice_label(const TuningChoice& c) {
    return std::string(shape_class_name(c.shape_class)) + " " + dtype_name(c.q_dtype) + "/" + dtype_name(c.kv_dtype);
}

std::string device_label(const TuningFile& f) {
    return f.device_name + " (" + device_arch_text(f.cc_major, f.cc_minor) + ")";
}

// Whether nothing at all is at `path` (a directory or unreadable file there is not "absent").
bool absent(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) != 0 && errno == ENOENT;
}

}  // namespace

const char* shape_class_name(ShapeClass c) { return kShapeClassNames[static_cast<int>(c)]; }

bool shape_class_from_name(const std::string& name, ShapeClass* out) {
    for (const ShapeClass c : kShapeClasses)
        if (name == shape_class_name(c)) {
            *out = c;
            return true;
        }
    return false;
}

std::string shape_class_list() {
    std::string list;
    for (const ShapeClass c : kShapeClasses) list += (list.empty() ? "" : ", ") + std::string(shape_class_name(c));
    return list;
}

ShapeClass shape_class_of(int32_t total_q, int32_t num_seqs) {
    if (single_token_call(total_q, num_seqs)) return ShapeClass::kDecodeSingle;
    if (few_tokens_call(total_q, num_seqs)) return ShapeClass::kDecode;
    return total_q < kShortPrefillTokens ? ShapeClass::kPrefillShort : ShapeClass::kPrefillLong;
}

std::string bundle_checksum(const std::string& manifest_bytes) {
    char hex[kChecksumDigits + 1];
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(fnv1a64(manifest_bytes.data(), manifest_bytes.size())));
    return hex;
}

bool parse_tuning(const std::string& text, TuningFile* out, std::string* error) {
    JsonValue root;
    if (!parse_json(text, &root, error)) return false;
    Reader r{error};
    if (root.type != Type::kObject) return r.fail("(top level)", "an object");
    TuningFile file;
    if (!read_header(r, root, &file)) return false;
    const JsonValue* choices = r.member(root, "choices", Type::kArray, "choices", "an array");
    if (!choices) return false;
    std::set<std::string> seen;
    for (size_t i = 0; i < choices->array.size(); ++i) {
        const std::string path = "choices[" + std::to_string(i) + "]";
        TuningChoice c;
        if (!read_choice(r, choices->array[i], path, &c)) return false;
        if (!seen.insert(choice_label(c)).second)
            return r.fail(path, "the only choice for " + choice_label(c) + " (it appears twice)");
        file.choices.push_back(c);
    }
    *out = file;
    return true;
}

std::string tuning_json(const TuningFile& f) {
    std::ostringstream o;
    o << "{\n  \"format\": " << kTuningFormatVersion << ",\n  \"tool\": \"wideattn tune\",\n  \"date\": "
      << json_text(f.date) << ",\n  \"library_version\": " << json_text(f.library_version)
      << ",\n  \"device\": {\"name\": " << json_text(f.device_name) << ", \"cc_major\": " << f.cc_major
      << ", \"cc_minor\": " << f.cc_minor << ", \"driver_version\": " << f.driver_version
      << "},\n  \"bundle_checksum\": " << json_text(f.bundle_checksum) << ",\n  \"choices\": [";
    for (size_t i = 0; i < f.choices.size(); ++i) {
        const TuningChoice& c = f.choices[i];
        o << (i ? "," : "") << "\n    {\"class\": " << json_text(shape_class_name(c.shape_class))
          << ", \"q_dtype\": " << json_text(dtype_name(c.q_dtype)) << ", \"kv_dtype\": " << json_text(dtype_name(c.kv_dtype))
          << ", \"kernel\": " << json_text(c.kernel) << ",\n     \"timings\": [";
        for (size_t t = 0; t < c.timings.size(); ++t) {
            const TuningTiming& timing = c.timings[t];
            o << (t ? "," : "") << "\n       {\"kernel\": " << json_text(timing.kernel)
              << ", \"total_ms\": " << ms_text(timing.total_ms) << ", \"cases\": [";
            for (size_t k = 0; k < timing.case_ms.size(); ++k)
                o << (k ? ", " : "") << "{\"case\": " << json_text(timing.case_ms[k].first)
                  << ", \"median_ms\": " << ms_text(timing.case_ms[k].second) << "}";
            o << "]}";
        }
        o << "]}";
    }
    o << "\n  ]\n}\n";
    return o.str();
}

wideattn_status ContextTuning::open(const std::string& bundle_dir, const std::vector<ManifestKernel>& kernels,
                                    std::string* error) {
    std::string manifest, why;
    if (!read_regular_file(bundle_dir + "/" + kManifestFileName, kMaxManifestBytes, &manifest, &why)) {
        *error = why;
        return WIDEATTN_ERROR_BUNDLE;
    }
    checksum_ = bundle_checksum(manifest);
    const char* env = std::getenv(kTuningPathEnv);
    const bool named = env && *env;
    if (named && std::string(env) == kTuningOff) {
        off_ = true;
        path_ = std::string(kTuningPathEnv) + "=" + kTuningOff;
        return WIDEATTN_OK;
    }
    path_ = named ? std::string(env) : bundle_dir + "/" + kTuningFileName;
    if (!named && absent(path_)) return WIDEATTN_OK;  // no tuning file beside the bundle: the priority order
    std::string text;
    if (!read_regular_file(path_, kMaxTuningBytes, &text, &why)) {
        *error = std::string("cannot read the tuning file ") + path_ +
                 (named ? std::string(" (named by ") + kTuningPathEnv + ")" : std::string()) + ": " + why;
        return WIDEATTN_ERROR_BUNDLE;
    }
    why.clear();
    if (!parse_tuning(text, &file_, &why)) {
        *error = "tuning file " + path_ + " is malformed: " + why + " (rewrite it with `wideattn tune` or remove it)";
        return WIDEATTN_ERROR_BUNDLE;
    }
    present_ = true;
    bundle_matches_ = file_.bundle_checksum == checksum_;
    if (!bundle_matches_) {
        bundle_reason_ = "it was written for bundle " + file_.bundle_checksum + ", this bundle is " + checksum_ +
                         " (rerun `wideattn tune`)";
        return WIDEATTN_OK;
    }
    for (const TuningChoice& c : file_.choices) {
        const auto serves = [&](const ManifestKernel& k) {
            return k.kind == kKindPrefill && k.name == c.kernel && k.q_dtype == c.q_dtype && k.kv_dtype == c.kv_dtype;
        };
        bool found = false;
        for (const ManifestKernel& k : kernels) found = found || serves(k);
        if (found)
            usable_.push_back(c);
        else
            notes_.push_back(choice_label(c) + " names " + c.kernel + (has_prefill_kernel(kernels, c.kernel)
                                                                           ? ", which does not take these dtypes"
                                                                           : ", which is not a prefill kernel of the bundle") +
                             ": left out");
    }
    return WIDEATTN_OK;
}

bool ContextTuning::in_play() const { return present_ && bundle_matches_; }

std::string ContextTuning::choice_for(const wideattn_prefill_params& p, int32_t cc_major, int32_t cc_minor,
                                      const std::string* device_name) const {
    if (!in_play()) return {};
    std::string mismatch;
    if (cc_major != file_.cc_major || cc_minor != file_.cc_minor)
        mismatch = device_arch_text(cc_major, cc_minor);
    else if (device_name && *device_name != file_.device_name)
        mismatch = *device_name;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!mismatch.empty()) {
        last_state_ = WIDEATTN_TUNING_IGNORED;
        last_reason_ = "it was written on " + device_label(file_) + ", the last selection was for " + mismatch;
        return {};
    }
    last_state_ = WIDEATTN_TUNING_ACTIVE;
    last_reason_ = "followed on " + device_label(file_) +
                   (device_name ? std::string() : std::string(" (compute capability compared, name not known)"));
    const ShapeClass shape = shape_class_of(p.total_q, p.num_seqs);
    for (const TuningChoice& c : usable_)
        if (c.shape_class == shape && c.q_dtype == p.q_dtype && c.kv_dtype == p.kv_dtype) return c.kernel;
    return {};
}

int32_t ContextTuning::state(std::string* message) const {
    std::ostringstream m;
    int32_t state = WIDEATTN_TUNING_NONE;
    if (!present_) {
        m << (off_ ? "tuning files are off (" : "no tuning file at ") << path_ << (off_ ? ")" : "")
          << ": the built-in priority order";
    } else if (!bundle_matches_) {
        state = WIDEATTN_TUNING_IGNORED;
        m << "tuning file " << path_ << " ignored: " << bundle_reason_;
    } else {
        std::lock_guard<std::mutex> lock(mutex_);
        state = last_state_;
        m << "tuning file " << path_ << " (" << device_label(file_) << ", " << usable_.size() << " choice"
          << (usable_.size() == 1 ? "" : "s") << "): ";
        if (state == WIDEATTN_TUNING_READ)
            m << "matches the bundle; no device compared yet";
        else
            m << (state == WIDEATTN_TUNING_IGNORED ? "ignored: " : "") << last_reason_;
    }
    for (const std::string& note : notes_) m << "; " << note;
    *message = m.str();
    return state;
}

}  // namespace wideattn
