// test_input_limits.cpp - the reader and the accuracy CLI against hostile inputs: declared sizes
// that overflow or that the file does not store, block rows and threads beyond what exists,
// string attributes as h5py writes them (UTF-8, variable length) and broken ones, bfloat16 bits
// stored as int16, integer options that would wrap, crashes and hangs of libhdf5 on corrupt
// files, and the fuzz seed corpus. Each case checks the message.
#include <doctest/doctest.h>

#include <hdf5.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "accuracy/accuracy_error.h"
#include "accuracy/bf16.h"
#include "accuracy/drift_report.h"
#include "accuracy/hdf5_util.h"
#include "accuracy/isolated_call.h"
#include "accuracy/kl_drift.h"
#include "accuracy/logit_dump.h"
#include "accuracy_test_util.h"
#include "gate_test_util.h"

using namespace wideattn::accuracy;
using namespace wideattn::accuracy::testing;

namespace {

constexpr int64_t kTwoTo62 = int64_t{1} << 62;
constexpr int64_t kTwoTo20 = int64_t{1} << 20;

std::string open_error(const std::string& path) {
    try {
        LogitDumpReader reader(path);
    } catch (const AccuracyError& e) {
        return e.what();
    }
    return "";
}

// A file of the dump reader's fuzz seed corpus (tests/fuzz/corpus/logit_dump), which must exist;
// empty where the test data directory is not set (the test binary run outside meson test).
std::string seed_corpus_file(const std::string& name) {
    const char* data = std::getenv("WIDEATTN_TEST_DATA");
    if (data == nullptr) return "";
    const std::string path = std::string(data) + "/../tests/fuzz/corpus/logit_dump/" + name;
    REQUIRE(std::filesystem::exists(path));
    return path;
}

// A chunked `logits` dataset of the given extent and element type with nothing written: the
// file is a few KiB whatever it declares.
void write_declared_only(const std::string& path, int64_t tokens, int64_t vocab, hid_t type, int64_t chunk_cols) {
    H5Handle file = create_hdf5_file(path);
    const hsize_t dims[2] = {static_cast<hsize_t>(tokens), static_cast<hsize_t>(vocab)};
    H5Handle space(H5Screate_simple(2, dims, nullptr));
    H5Handle props(H5Pcreate(H5P_DATASET_CREATE));
    const hsize_t chunk[2] = {1, static_cast<hsize_t>(chunk_cols)};
    REQUIRE(H5Pset_chunk(props.get(), 2, chunk) >= 0);
    H5Handle dataset(H5Dcreate2(file.get(), kLogitsDataset, type, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT));
    REQUIRE(dataset.valid());
}

// A scalar string attribute in `cset`, variable-length (as h5py writes str) or fixed-length.
void write_string(hid_t object, const char* name, const std::string& value, H5T_cset_t cset, bool variable) {
    H5Handle type(H5Tcopy(H5T_C_S1));
    REQUIRE(H5Tset_size(type.get(), variable ? H5T_VARIABLE : std::max<size_t>(1, value.size())) >= 0);
    REQUIRE(H5Tset_cset(type.get(), cset) >= 0);
    H5Handle space(H5Screate(H5S_SCALAR));
    H5Handle attribute(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    REQUIRE(attribute.valid());
    const char* text = value.c_str();
    REQUIRE(H5Awrite(attribute.get(), type.get(), variable ? static_cast<const void*>(&text)
                                                           : static_cast<const void*>(value.data())) >= 0);
}

void write_int_attribute(hid_t object, const char* name, int64_t value) {
    H5Handle space(H5Screate(H5S_SCALAR));
    H5Handle attribute(H5Acreate2(object, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
    REQUIRE(H5Awrite(attribute.get(), H5T_NATIVE_INT64, &value) >= 0);
}

// A [tokens, vocab] dump of bfloat16 bits in 16-bit integers of `file_type` (int16 as torch's
// tensor.view(torch.int16) gives, or uint16), marked dtype="bfloat16" the way h5py marks it
// (a variable-length UTF-8 string), with UTF-8 metadata.
void write_bf16_bits(const std::string& path, int64_t tokens, int64_t vocab, hid_t file_type, hid_t memory_type,
                     const std::vector<uint16_t>& bits) {
    H5Handle file = create_hdf5_file(path);
    const hsize_t dims[2] = {static_cast<hsize_t>(tokens), static_cast<hsize_t>(vocab)};
    H5Handle space(H5Screate_simple(2, dims, nullptr));
    H5Handle dataset(H5Dcreate2(file.get(), kLogitsDataset, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                H5P_DEFAULT));
    REQUIRE(dataset.valid());
    REQUIRE(H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits.data()) >= 0);
    write_string(dataset.get(), kDtypeAttribute, kBFloat16Name, H5T_CSET_UTF8, true);
    write_string(file.get(), "model", "gemma-4 \xce\x94", H5T_CSET_UTF8, true);
}

// bf16 bits of logits in [-8, 8): about half of them negative.
std::vector<uint16_t> signed_bf16_bits(int64_t count) {
    std::vector<uint16_t> bits;
    for (float x : random_row(5, count, -8.0, 8.0)) bits.push_back(wideattn::float_to_bf16(x));
    return bits;
}

}  // namespace

TEST_CASE("input limits: a vocab of 2^62 in a tiny file is refused (it divided by zero)") {
    silence_hdf5_errors();
    TempDir dir;
    const std::string path = dir.file("huge_vocab.h5");
    write_declared_only(path, 2, kTwoTo62, H5T_IEEE_F32LE, 1024);
    CHECK(std::filesystem::file_size(path) < 16384);
    const std::string error = open_error(path);
    CHECK(error.find("declares a vocab of 4611686018427387904 (at most 2147483648: token ids are int32)") !=
          std::string::npos);
    const CliRun run = run_accuracy_cli({"kl", path, path});
    CHECK(run.status == 2);
    CHECK(run.err.find("huge_vocab.h5' dataset 'logits' declares a vocab of 4611686018427387904") != std::string::npos);
}

TEST_CASE("input limits: declared bytes that overflow int64 are named, not wrapped") {
    silence_hdf5_errors();
    TempDir dir;
    const std::string path = dir.file("overflow.h5");
    write_declared_only(path, kTwoTo62, kMaxVocab, H5T_IEEE_F32LE, 1024);
    CHECK(open_error(path).find("declared bytes: 4611686018427387904 x 8589934592 does not fit a 64-bit integer") !=
          std::string::npos);
}

TEST_CASE("input limits: a sparse (2^20 x 2^20) dataset is refused at once, not read for minutes") {
    silence_hdf5_errors();
    TempDir dir;
    const std::string path = dir.file("sparse.h5");
    write_declared_only(path, kTwoTo20, kTwoTo20, H5T_IEEE_F32LE, kTwoTo20);
    const auto start = std::chrono::steady_clock::now();
    const std::string error = open_error(path);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(error.find("sparse.h5' dataset 'logits' [1048576, 1048576] float32 declares 4398046511104 bytes of data "
                     "but stores 0 (at most 1024 x the stored bytes + 1048576 are accepted") != std::string::npos);
    CHECK(seconds < 5.0);
    // A few never-written chunks within the slack pass this check, and are refused as never written
    // (before 2026-12-01 they read as fill values: rows of zeros).
    write_declared_only(dir.file("small_sparse.h5"), 4, 64, H5T_IEEE_F32LE, 64);
    CHECK(open_error(dir.file("small_sparse.h5")).find("small_sparse.h5' dataset 'logits': rows 0..3 (4 of 4) were "
                                                       "never written") != std::string::npos);
}

TEST_CASE("input limits: row ranges that would overflow first + count are refused") {
    TempDir dir;
    const std::string path = dir.file("rows.h5");
    {
        LogitDumpWriter writer(path, 4, LogitType::kFloat32, {});
        const std::vector<float> rows(8, 0.5f);
        writer.append_rows(rows.data(), 2);
    }
    LogitDumpReader reader(path);
    std::vector<float> out(8);
    CHECK_THROWS_WITH_AS(reader.read_rows(1, std::numeric_limits<int64_t>::max(), out.data()),
                         doctest::Contains("9223372036854775807 rows from row 1 are outside 0..2"), AccuracyError);
    CHECK_THROWS_WITH_AS(reader.read_rows(3, 0, out.data()), doctest::Contains("are outside 0..2"), AccuracyError);
}

TEST_CASE("input limits: block rows are clamped to the rows that exist, workers to the blocks") {
    TempDir dir;
    REQUIRE(run_accuracy_cli({"make-sample", dir.path(), "--tokens", "64", "--vocab", "512", "--roles",
                              "reference,baseline"}).status == 0);
    const std::string ref = dir.file("sample_reference.h5"), base = dir.file("sample_baseline.h5");
    const DriftReport plain = compute_drift(ref, base, "");
    for (const int64_t rows : {int64_t{100000}, int64_t{4503599627370497}, std::numeric_limits<int64_t>::max()}) {
        CAPTURE(rows);
        DriftOptions options;
        options.block_rows = rows;
        options.threads = DriftOptions::kMaxThreads;
        // 64 rows x 512 floats x 2 dumps: 256 KiB for the one worker the one block needs.
        options.max_block_buffer_bytes = 64 * 512 * 4 * 2;
        const DriftReport clamped = compute_drift(ref, base, "", options);
        CHECK(clamped.candidate_kl == plain.candidate_kl);
    }
    // The CLI form that crashed (SIGSEGV / double free) before.
    const CliRun run = run_accuracy_cli({"kl", ref, base, "--block-rows", "4503599627370497", "--threads", "64"});
    CHECK(run.status == 0);
    CHECK(run.err.find("error") == std::string::npos);
}

TEST_CASE("input limits: block buffers beyond the limit are refused naming rows and workers") {
    TempDir dir;
    REQUIRE(run_accuracy_cli({"make-sample", dir.path(), "--tokens", "64", "--vocab", "512", "--roles",
                              "reference,baseline"}).status == 0);
    DriftOptions options;
    options.block_rows = 32;
    options.threads = 2;
    options.max_block_buffer_bytes = 32 * 512 * 4 * 2 * 2 - 1;
    CHECK_THROWS_WITH_AS(compute_drift(dir.file("sample_reference.h5"), dir.file("sample_baseline.h5"), "", options),
                         doctest::Contains("block buffers (--block-rows 32, --threads 2): 32 rows x 512 floats x 2 "
                                           "dumps x 2 workers need 262144 bytes, more than the limit of 262143"),
                         AccuracyError);
    options.threads = DriftOptions::kMaxThreads + 1;
    CHECK_THROWS_WITH_AS(compute_drift(dir.file("sample_reference.h5"), dir.file("sample_baseline.h5"), "", options),
                         doctest::Contains("workers (--threads) must be in 1..64, got 65"), AccuracyError);
}

TEST_CASE("input limits: integer options that would wrap are refused, naming option and value") {
    TempDir dir;
    REQUIRE(run_accuracy_cli({"make-sample", dir.path(), "--tokens", "8", "--vocab", "64", "--roles",
                              "reference,baseline"}).status == 0);
    const std::string ref = dir.file("sample_reference.h5"), base = dir.file("sample_baseline.h5");
    const struct {
        std::vector<std::string> args;
        const char* message;
    } cases[] = {
        {{"bench-read", ref, base, "--repeat", "4294967297"}, "option '--repeat': '4294967297' is not an integer in 1..1000"},
        {{"kl", ref, base, "--threads", "4294967296"}, "option '--threads': '4294967296' is not an integer in 1..64"},
        {{"kl", ref, base, "--threads", "65"}, "option '--threads': '65' is not an integer in 1..64"},
        {{"kl", ref, base, "--threads", "99999999999999999999"}, "'99999999999999999999' is not an integer in 1..64"},
        {{"kl", ref, base, "--block-rows", "0"}, "option '--block-rows': '0' is not an integer >= 1"},
        {{"kl", ref, base, "--block-rows", " 5"}, "option '--block-rows': ' 5' is not an integer >= 1"},
        {{"kl", ref, base, "--block-rows", "5x"}, "option '--block-rows': '5x' is not an integer >= 1"},
        {{"gate", ref, base, "--baseline", base, "--block-tokens", "-3"}, "option '--block-tokens': '-3' is not an integer >= 1"},
        {{"make-sample", dir.path(), "--tokens", "4611686018427387904"},
         "option '--tokens': '4611686018427387904' is not an integer in 1..16777216"},
        {{"make-sample", dir.path(), "--vocab", "4194305"}, "option '--vocab': '4194305' is not an integer in 2..4194304"},
        {{"make-sample", dir.path(), "--seed", "-1"}, "option '--seed': '-1' is not an integer >= 0"},
        {{"make-attn-sample", dir.file("a.h5"), "--seed", "18446744073709551616"},
         "option '--seed': '18446744073709551616' is not an integer >= 0"},
        {{"attn-error", dir.file("a.h5"), "--max-rel-l2", "-1"}, "option '--max-rel-l2': '-1' is not a number >= 0"},
        {{"attn-error", dir.file("a.h5"), "--max-rel-l2", "nan"}, "option '--max-rel-l2': 'nan' is not a finite number"},
    };
    REQUIRE(run_accuracy_cli({"make-attn-sample", dir.file("a.h5")}).status == 0);
    for (const auto& c : cases) {
        const CliRun run = run_accuracy_cli(c.args);
        INFO(c.args[0] << ": " << run.err);
        CHECK(run.status == 2);
        CHECK(run.err.find(c.message) != std::string::npos);
    }
}

TEST_CASE("input limits: string attributes as h5py writes them (UTF-8, variable length) are read") {
    TempDir dir;
    const std::string path = dir.file("utf8.h5");
    {
        LogitDumpWriter writer(path, 4, LogitType::kFloat32, {});
        const std::vector<float> rows(8, 0.25f);
        writer.append_rows(rows.data(), 2);
    }
    {
        // Replace the writer's ASCII attributes with UTF-8 ones of each storage kind.
        H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
        REQUIRE(file.valid());
        for (const char* key : {"model", "variant", "engine"}) REQUIRE(H5Adelete(file.get(), key) >= 0);
        write_string(file.get(), "model", "gemma-4 \xce\x94 31b", H5T_CSET_UTF8, true);
        write_string(file.get(), "variant", "wideattn \xe2\x80\x94 e4m3", H5T_CSET_UTF8, false);
        write_string(file.get(), "engine", "vllm", H5T_CSET_ASCII, true);
    }
    const LogitDumpInfo info = LogitDumpReader(path).info();
    CHECK(info.metadata.model == "gemma-4 \xce\x94 31b");
    CHECK(info.metadata.variant == "wideattn \xe2\x80\x94 e4m3");
    CHECK(info.metadata.engine == "vllm");
    CHECK(info.warnings.empty());
}

TEST_CASE("input limits: the committed end-to-end dumps (written by h5py) have their metadata") {
    const char* data = std::getenv("WIDEATTN_TEST_DATA");
    if (data == nullptr) return;
    const std::string path = std::string(data) + "/e2e/2026-11-29-3f5c9ad/gemma4/samples/e2e_sample_reference.h5";
    if (!std::filesystem::exists(path)) return;
    const LogitDumpInfo info = LogitDumpReader(path).info();
    CHECK(info.metadata.model.rfind("e2e-gemma4-global-tiny", 0) == 0);
    CHECK(info.metadata.variant.find("bf16 weights") != std::string::npos);
    CHECK(info.metadata.engine.rfind("tools/e2e_drift.py", 0) == 0);
}

TEST_CASE("input limits: bfloat16 bits stored as int16 are read bit for bit, not clamped to 0") {
    TempDir dir;
    constexpr int64_t kTokens = 6, kVocab = 40;
    const std::vector<uint16_t> bits = signed_bf16_bits(kTokens * kVocab);
    const std::string as_int16 = dir.file("int16.h5"), as_uint16 = dir.file("uint16.h5"), as_be = dir.file("be.h5");
    write_bf16_bits(as_int16, kTokens, kVocab, H5T_STD_I16LE, H5T_NATIVE_INT16, bits);
    write_bf16_bits(as_uint16, kTokens, kVocab, H5T_STD_U16LE, H5T_NATIVE_UINT16, bits);
    write_bf16_bits(as_be, kTokens, kVocab, H5T_STD_I16BE, H5T_NATIVE_INT16, bits);
    for (const std::string& path : {as_int16, as_uint16, as_be}) {
        CAPTURE(path);
        LogitDumpReader reader(path);
        CHECK(reader.info().type == LogitType::kBFloat16);
        CHECK(reader.info().metadata.model == "gemma-4 \xce\x94");
        std::vector<float> rows(static_cast<size_t>(kTokens * kVocab));
        reader.read_rows(0, kTokens, rows.data());
        int negative = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
            REQUIRE(rows[i] == wideattn::bf16_to_float(bits[i]));
            negative += rows[i] < 0.0f;
        }
        CHECK(negative > 0);
    }
    // Identical bits: KL exactly 0 (the by-value conversion gave mean KL 0.005 here).
    const DriftReport report = compute_drift(as_uint16, as_int16, as_be);
    for (double kl : report.candidate_kl) CHECK(kl == 0.0);
    for (double kl : report.baseline_kl) CHECK(kl == 0.0);
}

TEST_CASE("input limits: 16-bit integers without a readable dtype=\"bfloat16\" are refused, saying why") {
    silence_hdf5_errors();
    TempDir dir;
    const std::string path = dir.file("int_dtype.h5");
    {
        H5Handle file = create_hdf5_file(path);
        const hsize_t dims[2] = {2, 3};
        H5Handle space(H5Screate_simple(2, dims, nullptr));
        H5Handle dataset(H5Dcreate2(file.get(), kLogitsDataset, H5T_STD_I16LE, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                                    H5P_DEFAULT));
        write_int_attribute(dataset.get(), kDtypeAttribute, 16);
    }
    CHECK(open_error(path).find("has an unsupported element type (an integer type of 2 bytes, dtype attribute is an "
                                "integer attribute, not a string)") != std::string::npos);
}

TEST_CASE("input limits: an unreadable optional attribute is a warning, not a failure") {
    silence_hdf5_errors();
    TempDir dir;
    const std::string path = dir.file("odd_attributes.h5");
    {
        LogitDumpWriter writer(path, 4, LogitType::kFloat32, {"m", "v", "e"});
        const std::vector<float> rows = random_row(5, 8, -2.0, 2.0);
        writer.append_rows(rows.data(), 2);
    }
    {
        H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
        for (const char* key : {"model", "variant", "engine"}) REQUIRE(H5Adelete(file.get(), key) >= 0);
        write_int_attribute(file.get(), "model", 7);
        // Two strings where one is expected.
        H5Handle type(H5Tcopy(H5T_C_S1));
        H5Tset_size(type.get(), 2);
        const hsize_t two = 2;
        H5Handle space(H5Screate_simple(1, &two, nullptr));
        H5Handle attribute(H5Acreate2(file.get(), "variant", type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
        REQUIRE(H5Awrite(attribute.get(), type.get(), "abcd") >= 0);
    }
    const LogitDumpInfo info = LogitDumpReader(path).info();
    CHECK(info.metadata.model.empty());
    REQUIRE(info.warnings.size() == 2);
    CHECK(info.warnings[0] == "'" + path + "' root attribute 'model' is an integer attribute, not a string; left empty");
    CHECK(info.warnings[1].find("attribute 'variant' holds 2 elements, not one") != std::string::npos);
    CHECK(info.metadata.engine.empty());
    {
        // A fixed-length string longer than the reader reads (dense attribute storage holds it).
        const std::string long_path = dir.file("long_attribute.h5");
        H5Handle access(H5Pcreate(H5P_FILE_ACCESS));
        REQUIRE(H5Pset_libver_bounds(access.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) >= 0);
        H5Handle file(H5Fcreate(long_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()));
        const hsize_t dims[2] = {2, 4};
        H5Handle space(H5Screate_simple(2, dims, nullptr));
        H5Handle dataset(H5Dcreate2(file.get(), kLogitsDataset, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                    H5P_DEFAULT, H5P_DEFAULT));
        const std::vector<float> rows(8, 0.5f);
        REQUIRE(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) >= 0);
        write_string(file.get(), "engine", std::string(kMaxStringAttributeBytes + 1, 'x'), H5T_CSET_ASCII, false);
        file.reset();
        const LogitDumpInfo long_info = LogitDumpReader(long_path).info();
        REQUIRE(long_info.warnings.size() == 1);
        CHECK(long_info.warnings[0].find("attribute 'engine' is a fixed-length string of 65537 bytes (at most 65536 "
                                         "are read); left empty") != std::string::npos);
    }
    // kl and its JSON report carry the warnings; the run succeeds.
    const std::string json = dir.file("kl.json");
    const CliRun run = run_accuracy_cli({"kl", path, path, "--json", json});
    CHECK(run.status == 0);
    CHECK(read_text(json).find("\"warnings\":[\"'") != std::string::npos);
    const DriftReport report = compute_drift(path, path, "");
    CHECK(format_drift_text(report).find("warning: '" + path + "' root attribute 'model' is an integer attribute") !=
          std::string::npos);
}

TEST_CASE("input limits: attribute bytes that are not UTF-8 leave the JSON report valid") {
    TempDir dir;
    const std::string path = dir.file("latin1.h5");
    {
        LogitDumpWriter writer(path, 4, LogitType::kFloat32, {"caf\xe9 \xff", "v", "e"});
        const std::vector<float> rows = random_row(6, 8, -2.0, 2.0);
        writer.append_rows(rows.data(), 2);
    }
    CHECK(LogitDumpReader(path).info().metadata.model == "caf\xe9 \xff");
    const std::string json = dir.file("kl.json");
    REQUIRE(run_accuracy_cli({"kl", path, path, "--json", json}).status == 0);
    const std::string report = read_text(json);
    CHECK(report.find("\"model\":\"caf\\ufffd \\ufffd\"") != std::string::npos);
    CHECK(report.find('\xff') == std::string::npos);
    CHECK(report.find('\xe9') == std::string::npos);
}

TEST_CASE("input limits: a crash or a hang while a child checks a file is an error, not the end of the run") {
    const std::string path = "corrupt.h5";
    CHECK_THROWS_WITH_AS(probe_in_child(path, []() -> std::string { std::raise(SIGSEGV); return ""; }),
                         doctest::Contains("'corrupt.h5': libhdf5 crashed while reading the file's structure ("),
                         AccuracyError);
    CHECK_THROWS_WITH_AS(probe_in_child(path, []() -> std::string { for (;;) pause(); }, 300),
                         doctest::Contains("'corrupt.h5': libhdf5 was still reading the file's structure after 300 ms"),
                         AccuracyError);
    CHECK_THROWS_WITH_AS(probe_in_child(path, []() -> std::string { throw AccuracyError("the child's own message"); }),
                         "the child's own message", AccuracyError);
    // What the child returns comes back (the parent uses it instead of repeating risky reads).
    CHECK(probe_in_child(path, [] { return std::string("found\0here", 10); }) == std::string("found\0here", 10));
    // The child really is another process: what it changes is not seen here.
    static int counter = 0;
    REQUIRE(probe_in_child(path, [] { return std::to_string(++counter); }) == std::string("1"));
    CHECK(counter == 0);
    // The child's values come back through the pipe, cut at the limit plus one byte.
    const IsolatedResult long_value = run_isolated([] { return std::optional<std::string>(std::string(100, 'x')); },
                                                   kProbeTimeoutMs, 10);
    CHECK(long_value.status == IsolatedResult::Status::kDone);
    CHECK(long_value.value == std::string(11, 'x'));
    CHECK(run_isolated([] { return std::optional<std::string>(); }, kProbeTimeoutMs, 10).status ==
          IsolatedResult::Status::kFailed);
}

TEST_CASE("input limits: an unfiltered chunk index that does not add up is refused (HDF5 read past its buffer)") {
    // Found by the dump-reader fuzzer on 2026-12-01: a chunk index mutated to hold 6 entries for
    // 4 stored chunks; libhdf5 1.10 copied 64 bytes from an 8-byte buffer in H5Dread.
    const std::string path = seed_corpus_file("regression_chunk_index.h5");
    if (path.empty()) return;
    CHECK(open_error(path).find("dataset 'logits' [6, 40] float32 stores 1024 bytes in 6 unfiltered chunks of 256 "
                                "bytes (corrupt chunk index?)") != std::string::npos);
}

TEST_CASE("input limits: a chunk shape larger than a fixed dimension is refused (HDF5 copied past its buffer)") {
    // Found by the dump-reader fuzzer on 2026-12-01: a deflated dataset [6, 40] whose chunk shape
    // was mutated to [3, 2621440]; libhdf5 1.10 copied a chunk's bytes past what deflate returned.
    const std::string path = seed_corpus_file("regression_chunk_shape.h5");
    if (path.empty()) return;
    CHECK(open_error(path).find("dataset 'logits' [6, 40] float16 has chunks of 2621440 in dimension 1 of at most 40 "
                                "(corrupt chunk shape?)") != std::string::npos);
}

TEST_CASE("input limits: a chunk of more than 256 MiB in an extendible dataset is refused at open") {
    // Found by the dump-reader fuzzer on 2026-12-07: the chunk shape of an extendible (unlimited)
    // dataset mutated to a chunk of 4 GiB; libhdf5 1.10 allocated and filled it to read a row.
    const std::string path = seed_corpus_file("regression_chunk_bytes.h5");
    if (path.empty()) return;
    CHECK(open_error(path).find("dataset 'logits' [6, 40] float32 has chunks of 536870912 bytes (at most 268435456 "
                                "are read") != std::string::npos);
    // The limit itself: [1, 2^26] float32 chunks are 256 MiB, one element more is refused. The
    // file holds nothing, which is the refusal that follows the chunk check.
    TempDir dir;
    for (const int64_t cols : {int64_t{1} << 26, (int64_t{1} << 26) + 1}) {
        CAPTURE(cols);
        const std::string declared = dir.file("chunk_" + std::to_string(cols) + ".h5");
        {
            H5Handle file = create_hdf5_file(declared);
            const hsize_t dims[2] = {2, 4}, max_dims[2] = {H5S_UNLIMITED, H5S_UNLIMITED};
            H5Handle space(H5Screate_simple(2, dims, max_dims));
            H5Handle props(H5Pcreate(H5P_DATASET_CREATE));
            const hsize_t chunk[2] = {1, static_cast<hsize_t>(cols)};
            REQUIRE(H5Pset_chunk(props.get(), 2, chunk) >= 0);
            H5Handle dataset(H5Dcreate2(file.get(), kLogitsDataset, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                        props.get(), H5P_DEFAULT));
            REQUIRE(dataset.valid());
        }
        const std::string error = open_error(declared);
        const bool over = cols * 4 > kMaxChunkBytes;
        CHECK((error.find("has chunks of " + std::to_string(cols * 4) + " bytes") != std::string::npos) == over);
        CHECK((error.find("were never written") != std::string::npos) == !over);
    }
}

TEST_CASE("input limits: a deflated chunk that decodes to fewer bytes than its shape is refused (HDF5 read past it)") {
    // Made by hand on 2026-12-07 from the form the fuzzer found that day (regression_chunk_bytes.h5):
    // the chunk shape of an extendible deflated dataset changed from [2, 40] to [2, 1024]; libhdf5 1.10 copied rows out of the 320 bytes
    // deflate returned as if they were 8192 (an overflow under ASan, a crash at [2, 65536]).
    const std::string path = seed_corpus_file("regression_chunk_cols.h5");
    if (path.empty()) return;
    CHECK(open_error(path).find("dataset 'logits' [6, 40] float32 chunk at [0, 0] decodes to 320 bytes, not the "
                                "8192 of its chunk shape (corrupt chunk shape?)") != std::string::npos);
}

TEST_CASE("input limits: a deflated chunk stored in more bytes than it can take, or cut short, is refused") {
    // One [2, 40] float32 chunk written raw (H5Dwrite_chunk, no filter skipped): 320 bytes decoded.
    TempDir dir;
    const std::vector<float> logits = random_row(13, 2 * 40, -8.0, 8.0);
    std::vector<unsigned char> deflated(compressBound(320));
    uLongf deflated_bytes = static_cast<uLongf>(deflated.size());
    REQUIRE(compress2(deflated.data(), &deflated_bytes, reinterpret_cast<const Bytef*>(logits.data()), 320, 6) == Z_OK);
    deflated.resize(deflated_bytes);
    const auto write = [&](const std::string& path, const std::vector<unsigned char>& stored) {
        H5Handle file = create_hdf5_file(path);
        const hsize_t dims[2] = {2, 40};
        H5Handle space(H5Screate_simple(2, dims, nullptr));
        H5Handle props(H5Pcreate(H5P_DATASET_CREATE));
        REQUIRE(H5Pset_chunk(props.get(), 2, dims) >= 0);
        REQUIRE(H5Pset_deflate(props.get(), 6) >= 0);
        H5Handle dataset(H5Dcreate2(file.get(), kLogitsDataset, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                    props.get(), H5P_DEFAULT));
        REQUIRE(dataset.valid());
        const hsize_t offset[2] = {0, 0};
        REQUIRE(H5Dwrite_chunk(dataset.get(), H5P_DEFAULT, 0, offset, stored.size(), stored.data()) >= 0);
    };
    const std::string whole = dir.file("whole.h5");
    write(whole, deflated);
    LogitDumpReader reader(whole);
    std::vector<float> rows(logits.size(), std::nanf(""));
    reader.read_rows(0, 2, rows.data());
    CHECK(std::memcmp(rows.data(), logits.data(), rows.size() * sizeof(float)) == 0);

    const std::string cut = dir.file("cut.h5");
    write(cut, std::vector<unsigned char>(deflated.begin(), deflated.begin() + deflated.size() / 2));
    CHECK(open_error(cut).find("dataset 'logits' [2, 40] float32 chunk at [0, 0] does not decode: its deflate "
                               "stream or checksum is cut short (corrupt?)") != std::string::npos);

    // At most a chunk's 320 bytes + 320 / 1024 + 1024 of slack may store it.
    const std::string oversized = dir.file("oversized.h5");
    std::vector<unsigned char> padded = deflated;
    padded.resize(320 + 1024 + 1, 0);
    write(oversized, padded);
    CHECK(open_error(oversized).find("chunk at [0, 0] is stored in 1345 bytes, more than a chunk of 320 bytes takes "
                                     "or the file's ") != std::string::npos);
}

TEST_CASE("input limits: shuffle, deflate and fletcher32 chunks read bit for bit; a filter the reader cannot size is refused") {
    TempDir dir;
    const int64_t tokens = 7, vocab = 45;  // neither a multiple of the chunk shape [3, 45]
    const std::vector<float> logits = random_row(11, tokens * vocab, -8.0, 8.0);
    const auto write = [&](const std::string& path, bool nbit) {
        H5Handle file = create_hdf5_file(path);
        const hsize_t dims[2] = {static_cast<hsize_t>(tokens), static_cast<hsize_t>(vocab)};
        const hsize_t max_dims[2] = {H5S_UNLIMITED, H5S_UNLIMITED};
        H5Handle space(H5Screate_simple(2, dims, max_dims));
        H5Handle props(H5Pcreate(H5P_DATASET_CREATE));
        const hsize_t chunk[2] = {3, static_cast<hsize_t>(vocab)};
        REQUIRE(H5Pset_chunk(props.get(), 2, chunk) >= 0);
        REQUIRE(H5Pset_shuffle(props.get()) >= 0);
        REQUIRE(H5Pset_deflate(props.get(), 6) >= 0);
        REQUIRE(H5Pset_fletcher32(props.get()) >= 0);
        if (nbit) REQUIRE(H5Pset_nbit(props.get()) >= 0);
        H5Handle dataset(H5Dcreate2(file.get(), kLogitsDataset, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                                    props.get(), H5P_DEFAULT));
        REQUIRE(dataset.valid());
        REQUIRE(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, logits.data()) >= 0);
    };
    const std::string filtered = dir.file("filtered.h5");
    write(filtered, false);
    LogitDumpReader reader(filtered);
    std::vector<float> rows(static_cast<size_t>(tokens * vocab), std::nanf(""));
    reader.read_rows(0, tokens, rows.data());
    CHECK(std::memcmp(rows.data(), logits.data(), rows.size() * sizeof(float)) == 0);

    const std::string nbit = dir.file("nbit.h5");
    write(nbit, true);
    CHECK(open_error(nbit).find("is stored with HDF5 filter " + std::to_string(H5Z_FILTER_NBIT) +
                                ", whose output the reader cannot size") != std::string::npos);
}

TEST_CASE("input limits: every file of the fuzz seed corpus is read or refused with a message") {
    const char* data = std::getenv("WIDEATTN_TEST_DATA");
    if (data == nullptr) return;
    const std::filesystem::path corpus = std::filesystem::path(data) / ".." / "tests" / "fuzz" / "corpus" / "logit_dump";
    REQUIRE(std::filesystem::is_directory(corpus));
    int read = 0, refused = 0;
    for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
        if (entry.path().extension() != ".h5") continue;
        CAPTURE(entry.path().string());
        try {
            const DriftReport report = compute_drift(entry.path().string(), entry.path().string(), "");
            for (double kl : report.candidate_kl) CHECK(kl == 0.0);
            ++read;
        } catch (const AccuracyError& e) {
            CHECK(std::string(e.what()).find(entry.path().filename().string()) != std::string::npos);
            ++refused;
        }
    }
    CHECK(read >= 7);
    CHECK(refused >= 13);
}

TEST_CASE("input limits: metadata and warnings pass intact through the findings of the child that checks a file") {
    silence_hdf5_errors();
    TempDir dir;
    const std::string path = dir.file("metadata.h5");
    {
        LogitDumpWriter writer(path, 4, LogitType::kFloat32, {"model \xce\x94", "", "engine"});
        const std::vector<float> rows(8, 0.25f);
        writer.append_rows(rows.data(), 2);
    }
    {
        H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
        REQUIRE(H5Adelete(file.get(), "variant") >= 0);
        write_int_attribute(file.get(), "variant", 3);
    }
    const LogitDumpInfo info = LogitDumpReader(path).info();
    CHECK(info.metadata.model == "model \xce\x94");
    CHECK(info.metadata.variant.empty());
    CHECK(info.metadata.engine == "engine");
    REQUIRE(info.warnings.size() == 1);
    CHECK(info.warnings[0] == "'" + path + "' root attribute 'variant' is an integer attribute, not a string; left empty");
}

TEST_CASE("input limits: a dump written by h5py (bfloat16 bits as int16, UTF-8 strings) reads as written") {
    const std::string path = seed_corpus_file("h5py_bfloat16_int16.h5");
    if (path.empty()) return;
    LogitDumpReader reader(path);
    CHECK(reader.info().type == LogitType::kBFloat16);
    CHECK(reader.info().metadata.model == "gemma-4 \xce\x94");
    CHECK(reader.info().metadata.variant == "torch view(int16)");
    CHECK(reader.info().metadata.engine == "h5py");
    CHECK(reader.read_tokens() == std::vector<int32_t>{0, 5, 10, 15, 20, 25});
    std::vector<float> rows(static_cast<size_t>(reader.info().tokens * reader.info().vocab));
    reader.read_rows(0, reader.info().tokens, rows.data());
    // h5py stored the top 16 bits of N(0, 4) float32 logits, one of them -inf (row 2, column 3).
    CHECK(std::isinf(rows[2 * 40 + 3]));
    int negative = 0;
    for (float x : rows) negative += x < 0.0f;
    CHECK(negative > 60);
}
