// tuning.h - the tuning file: per shape class and dtypes, the prefill kernel `wideattn tune`
// measured fastest on one device for one bundle, and the context state that follows it
// (docs/design.md, "Tuning file"). Pure parsing and bookkeeping; the driver queries stay in
// api.cpp.
//
// Shape classes use host-known values only (a call's selection never reads device data), tested
// in this order:
//   decode_single  total_q <= num_seqs (one query token per sequence: where a single_token
//                  kernel runs on its own)
//   decode         total_q <= kFewTokensPerSeq * num_seqs (verification steps: where a few_tokens
//                  kernel runs on its own; kernels/common/kernel_desc.h)
//   prefill_short  total_q < kShortPrefillTokens
//   prefill_long   the rest
// Chunked prefill and mixed batches fall into these by total_q: the max_seqlen hints that would
// tell them apart are not part of the params. Format 1 files written before decode_single
// existed stay valid: their decode choice applies to the decode class as defined here.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "dispatch/manifest.h"
#include "wideattn.h"

namespace wideattn {

constexpr int kTuningFormatVersion = 1;
constexpr const char* kTuningFileName = "tuning.json";  // beside the bundle's manifest.json
constexpr const char* kTuningPathEnv = "WIDEATTN_TUNING";
constexpr const char* kTuningOff = "off";  // WIDEATTN_TUNING=off: no tuning file (tests, comparisons)
constexpr int32_t kShortPrefillTokens = 8192;

enum class ShapeClass { kDecodeSingle, kDecode, kPrefillShort, kPrefillLong };
constexpr ShapeClass kShapeClasses[] = {ShapeClass::kDecodeSingle, ShapeClass::kDecode, ShapeClass::kPrefillShort,
                                        ShapeClass::kPrefillLong};

const char* shape_class_name(ShapeClass c);
bool shape_class_from_name(const std::string& name, ShapeClass* out);
// The names of kShapeClasses in order, comma separated ("decode_single, decode, ...").
std::string shape_class_list();
ShapeClass shape_class_of(int32_t total_q, int32_t num_seqs);

// One kernel's time on a class: the sum over the class's cases of each case's median.
struct TuningTiming {
    std::string kernel;
    double total_ms = 0;
    std::vector<std::pair<std::string, double>> case_ms;  // (case name, median ms)
};

struct TuningChoice {
    ShapeClass shape_class = ShapeClass::kPrefillLong;
    int32_t q_dtype = WIDEATTN_DTYPE_BF16, kv_dtype = WIDEATTN_DTYPE_BF16;
    std::string kernel;                  // the chosen kernel (the smallest total_ms)
    std::vector<TuningTiming> timings;   // every kernel timed on the class
};

struct TuningFile {
    int format = kTuningFormatVersion;
    std::string device_name;
    int32_t cc_major = 0, cc_minor = 0;
    int32_t driver_version = 0;
    std::string bundle_checksum;  // bundle_checksum() of the bundle it was measured with
    std::string library_version, date;
    std::vector<TuningChoice> choices;
};

// FNV-1a 64 over manifest.json's bytes as 16 hex digits: the bundle's identity (the manifest
// carries every cubin's size and checksum and each kernel's priority).
std::string bundle_checksum(const std::string& manifest_bytes);

// Parses a tuning file's text; false with *error naming the field on a malformed file.
bool parse_tuning(const std::string& text, TuningFile* out, std::string* error);

// The JSON text of a tuning file (what parse_tuning reads back).
std::string tuning_json(const TuningFile& file);

// The tuning of one context: which file, whether it matches the bundle and the device, and the
// choice for a call. Thread-safe.
class ContextTuning {
  public:
    // At wideattn_open: reads $WIDEATTN_TUNING (which must then exist; "off": no tuning file) or
    // DIR/tuning.json (absent: no tuning). WIDEATTN_ERROR_BUNDLE with *error naming the file when it cannot be read or is
    // malformed. A file of another bundle is kept as ignored, with the reason.
    wideattn_status open(const std::string& bundle_dir, const std::vector<ManifestKernel>& kernels,
                         std::string* error);

    // Whether a device check needs the device's name (a file that matches the bundle).
    bool in_play() const;

    // The kernel the file chooses for p on a device of cc_major.cc_minor named *device_name
    // (nullptr: name unknown, only the compute capability is compared), or "" to follow the
    // priority order. Records the outcome for status().
    std::string choice_for(const wideattn_prefill_params& p, int32_t cc_major, int32_t cc_minor,
                           const std::string* device_name) const;

    // wideattn_tuning_state and a one-paragraph reason.
    int32_t state(std::string* message) const;

    const std::string& path() const { return path_; }
    const std::string& checksum() const { return checksum_; }
    const TuningFile& file() const { return file_; }

  private:
    std::string path_, checksum_;
    bool off_ = false, present_ = false, bundle_matches_ = false;
    std::string bundle_reason_;           // why the file does not match the bundle
    std::vector<std::string> notes_;      // choices left out, one reason each
    TuningFile file_;
    std::vector<TuningChoice> usable_;    // the choices this bundle can follow
    mutable std::mutex mutex_;            // guards the two below: the outcome of the last choice_for
    mutable int32_t last_state_ = WIDEATTN_TUNING_READ;
    mutable std::string last_reason_;
};

}  // namespace wideattn
