// fuzz_logit_dump.cpp - libFuzzer target for the HDF5 logit-dump reader (meson -Dfuzz=true,
// clang): each input's bytes are written to a temporary file, which is opened through
// LogitDumpReader; its token ids and every row are read (through the direct path where the
// layout allows it, then again through H5Dread), and the file's drift against itself is
// computed. A refusal (AccuracyError) is the expected outcome for most inputs; a crash, a
// sanitizer report or any other exception is a finding. Seed corpus: tests/fuzz/corpus/logit_dump/.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "accuracy/accuracy_error.h"
#include "accuracy/hdf5_util.h"
#include "accuracy/kl_drift.h"
#include "accuracy/logit_dump.h"

namespace {

using wideattn::accuracy::AccuracyError;
using wideattn::accuracy::LogitDumpReader;

// Rows per read: small blocks exercise the block and chunk boundaries.
constexpr int64_t kRowsPerRead = 3;

// One temporary file per process, rewritten for each input and removed at exit.
const std::string& input_path() {
    static const std::string path = [] {
        const char* directory = std::getenv("TMPDIR");
        std::string pattern = std::string(directory != nullptr ? directory : "/tmp") + "/wideattn-fuzz-XXXXXX";
        const int fd = mkstemp(pattern.data());
        if (fd < 0) std::abort();
        close(fd);
        std::atexit([] { std::remove(input_path().c_str()); });
        return pattern;
    }();
    return path;
}

bool write_input(const uint8_t* data, size_t size) {
    FILE* file = std::fopen(input_path().c_str(), "wb");
    if (file == nullptr) return false;
    const bool written = std::fwrite(data, 1, size, file) == size;
    return std::fclose(file) == 0 && written;
}

void read_every_row(LogitDumpReader& reader) {
    const int64_t tokens = reader.info().tokens, vocab = reader.info().vocab;
    std::vector<float> rows(static_cast<size_t>(kRowsPerRead * vocab));
    for (int64_t first = 0; first < tokens; first += kRowsPerRead)
        reader.read_rows(first, std::min(kRowsPerRead, tokens - first), rows.data());
}

void exercise(const std::string& path) {
    LogitDumpReader reader(path);
    reader.read_tokens();
    read_every_row(reader);
    reader.set_direct_reads(false);
    read_every_row(reader);
    wideattn::accuracy::DriftOptions options;
    options.threads = 1;
    wideattn::accuracy::compute_drift(path, path, "", options);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    wideattn::accuracy::silence_hdf5_errors();
    if (!write_input(data, size)) return 0;
    try {
        exercise(input_path());
    } catch (const AccuracyError&) {
        // A refusal with a message: what a malformed file should get.
    }
    return 0;
}
