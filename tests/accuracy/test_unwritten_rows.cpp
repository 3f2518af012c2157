// test_unwritten_rows.cpp - dumps as a writer that crashed or was killed leaves them: a `logits`
// dataset made at its full shape but never written (contiguous, chunked, chunked + deflate) or
// written up to row 8 of 16, gaps, chunks that split rows, unwritten token ids; and rows whose
// logits are all one value (fill values of space allocated early or of a contiguous dataset
// written in part, a zeroed buffer). The reader refuses rows without storage at open, naming
// file, dataset and rows; kl, gate and bench-read exit 2 with that message whichever argument
// the dump is, and report nothing; rows of one value are refused unless --allow-constant-rows.
#include <doctest/doctest.h>

#include <hdf5.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "accuracy/accuracy_error.h"
#include "accuracy/hdf5_util.h"
#include "accuracy/kl_drift.h"
#include "accuracy/logit_dump.h"
#include "accuracy_test_util.h"
#include "gate_test_util.h"

using namespace wideattn::accuracy;
using namespace wideattn::accuracy::testing;

namespace {

constexpr int64_t kTokens = 16;
constexpr int64_t kVocab = 40;
constexpr hsize_t kChunkRows = 2;
constexpr int64_t kWrittenRows = 8;  // a writer killed at token 8 of 16

// Row t of every complete dump here (the reference's logits).
std::vector<float> logits_of_row(int64_t t) { return random_row(static_cast<uint64_t>(t) + 31, kVocab, -6.0, 6.0); }

// How a test dataset is stored: contiguous (chunk_rows 0) or in chunks of chunk_rows x
// chunk_cols, optionally deflated, with the space allocated when first written (HDF5's default
// for chunks) or at creation with fill values written then.
struct Layout {
    const char* name;
    hsize_t chunk_rows = 0;
    hsize_t chunk_cols = kVocab;
    bool gzip = false;
    bool allocate_early = false;
};

const Layout kContiguous{"contiguous"};
const Layout kChunked{"chunked", kChunkRows};
const Layout kChunkedGzip{"chunked + gzip", kChunkRows, kVocab, true};

// Rows first .. first + rows - 1, columns first_col .. first_col + cols - 1 of a dataset.
struct Block {
    int64_t first, rows;
    int64_t first_col = 0, cols = kVocab;
};

// Writes `block` of logits_of_row into `dataset` ([tokens, kVocab] float32).
void write_block(hid_t dataset, const Block& block) {
    std::vector<float> values;
    for (int64_t t = block.first; t < block.first + block.rows; ++t) {
        const std::vector<float> row = logits_of_row(t);
        values.insert(values.end(), row.begin() + block.first_col, row.begin() + block.first_col + block.cols);
    }
    const hsize_t start[2] = {static_cast<hsize_t>(block.first), static_cast<hsize_t>(block.first_col)};
    const hsize_t count[2] = {static_cast<hsize_t>(block.rows), static_cast<hsize_t>(block.cols)};
    H5Handle file_space(H5Dget_space(dataset));
    REQUIRE(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) >= 0);
    H5Handle memory_space(H5Screate_simple(2, count, nullptr));
    REQUIRE(H5Dwrite(dataset, H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), H5P_DEFAULT, values.data()) >= 0);
}

// A float32 `logits` dataset [tokens, kVocab] stored as `layout`, of which only `written` was
// written: what a writer that made the dataset at its full shape and died leaves.
void write_partial_dump(const std::string& path, const Layout& layout, const std::vector<Block>& written,
                        int64_t tokens = kTokens) {
    H5Handle file = create_hdf5_file(path);
    const hsize_t dims[2] = {static_cast<hsize_t>(tokens), static_cast<hsize_t>(kVocab)};
    H5Handle space(H5Screate_simple(2, dims, nullptr));
    H5Handle props(H5Pcreate(H5P_DATASET_CREATE));
    if (layout.chunk_rows > 0) {
        const hsize_t chunk[2] = {layout.chunk_rows, layout.chunk_cols};
        REQUIRE(H5Pset_chunk(props.get(), 2, chunk) >= 0);
        if (layout.gzip) REQUIRE(H5Pset_deflate(props.get(), 4) >= 0);
    }
    if (layout.allocate_early) {
        REQUIRE(H5Pset_alloc_time(props.get(), H5D_ALLOC_TIME_EARLY) >= 0);
        REQUIRE(H5Pset_fill_time(props.get(), H5D_FILL_TIME_ALLOC) >= 0);
    }
    H5Handle dataset(H5Dcreate2(file.get(), kLogitsDataset, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, props.get(),
                                H5P_DEFAULT));
    REQUIRE(dataset.valid());
    for (const Block& block : written) write_block(dataset.get(), block);
}

// A complete dump of `tokens` rows through the project's writer, rows given by `row_of`.
template <typename RowOf>
void write_complete_dump(const std::string& path, RowOf row_of, int64_t tokens = kTokens, int64_t vocab = kVocab) {
    LogitDumpWriter writer(path, vocab, LogitType::kFloat32, {"m", "v", "e"}, 4);
    for (int64_t t = 0; t < tokens; ++t) {
        const std::vector<float> row = row_of(t);
        writer.append_rows(row.data(), 1);
    }
    writer.close();
}

std::string open_error(const std::string& path) {
    try {
        LogitDumpReader reader(path);
    } catch (const AccuracyError& e) {
        return e.what();
    }
    return "";
}

std::string drift_error(const std::string& reference, const std::string& candidate, const std::string& baseline = "",
                        const DriftOptions& options = {}) {
    try {
        compute_drift(reference, candidate, baseline, options);
    } catch (const AccuracyError& e) {
        return e.what();
    }
    return "";
}

// The message naming `path`'s rows never written, e.g. "'f.h5' dataset 'logits': rows 8..15 (8
// of 16) were never written".
std::string unwritten_text(const std::string& path, const std::string& rows) {
    return "'" + path + "' dataset 'logits': " + rows + " were never written";
}

// The message naming `path`'s rows of one value.
std::string constant_text(const std::string& path, const std::string& rows) {
    return "'" + path + "' dataset 'logits': " + rows;
}

}  // namespace

TEST_CASE("unwritten rows: the reader refuses them at open, naming file, dataset and rows, in every layout") {
    silence_hdf5_errors();
    TempDir dir;
    const struct {
        Layout layout;
        int64_t written;
        const char* rows;
        const char* why;
    } cases[] = {
        {kContiguous, 0, "rows 0..15 (16 of 16)", "the dataset's space was never allocated"},
        {kChunked, 0, "rows 0..15 (16 of 16)", "chunks missing from the chunk index"},
        {kChunked, kWrittenRows, "rows 8..15 (8 of 16)", "chunks missing from the chunk index"},
        {kChunkedGzip, 0, "rows 0..15 (16 of 16)", "chunks missing from the chunk index"},
        {kChunkedGzip, kWrittenRows, "rows 8..15 (8 of 16)", "chunks missing from the chunk index"},
    };
    int n = 0;
    for (const auto& c : cases) {
        CAPTURE(c.layout.name);
        CAPTURE(c.written);
        const std::string path = dir.file("broken_" + std::to_string(n++) + ".h5");
        write_partial_dump(path, c.layout, c.written > 0 ? std::vector<Block>{{0, c.written}} : std::vector<Block>{});
        const std::string error = open_error(path);
        CHECK(error.find(unwritten_text(path, c.rows)) != std::string::npos);
        CHECK(error.find(std::string("the file holds no data for them (") + c.why + "), which libhdf5 would read as "
                         "the fill value") != std::string::npos);
    }
    // Complete dumps of each layout read as before.
    for (const Layout& layout : {kContiguous, kChunked, kChunkedGzip}) {
        CAPTURE(layout.name);
        const std::string path = dir.file("complete.h5");
        write_partial_dump(path, layout, {{0, kTokens}});
        LogitDumpReader reader(path);
        std::vector<float> rows(static_cast<size_t>(kTokens * kVocab));
        reader.read_rows(0, kTokens, rows.data());
        for (int64_t t = 0; t < kTokens; ++t) {
            const std::vector<float> want = logits_of_row(t);
            CHECK(std::equal(want.begin(), want.end(), rows.begin() + t * kVocab));
        }
    }
}

TEST_CASE("unwritten rows: kl, gate and bench-read exit 2 naming them, in every argument position; no report") {
    silence_hdf5_errors();
    TempDir dir;
    const std::string ref = dir.file("reference.h5");
    write_complete_dump(ref, logits_of_row);
    const std::string json = dir.file("report.json");
    const struct {
        Layout layout;
        int64_t written;
        const char* rows;
    } cases[] = {
        {kContiguous, 0, "rows 0..15 (16 of 16)"},
        {kChunked, 0, "rows 0..15 (16 of 16)"},
        {kChunked, kWrittenRows, "rows 8..15 (8 of 16)"},
        {kChunkedGzip, 0, "rows 0..15 (16 of 16)"},
        {kChunkedGzip, kWrittenRows, "rows 8..15 (8 of 16)"},
    };
    int n = 0;
    for (const auto& c : cases) {
        const std::string broken = dir.file("broken_" + std::to_string(n++) + ".h5");
        write_partial_dump(broken, c.layout, c.written > 0 ? std::vector<Block>{{0, c.written}} : std::vector<Block>{});
        const std::vector<std::vector<std::string>> runs = {
            {"kl", ref, broken, "--json", json},
            {"kl", broken, ref, "--json", json},
            {"kl", ref, ref, "--baseline", broken, "--json", json},
            {"kl", ref, broken, "--allow-constant-rows", "--json", json},
            {"gate", ref, broken, "--baseline", ref, "--json", json},
            {"gate", broken, ref, "--baseline", ref, "--json", json},
            {"gate", ref, ref, "--baseline", broken, "--json", json},
            {"gate", ref, broken, "--budget", "1", "--json", json},
            {"gate", ref, ref, "--baseline", broken, "--rule", "point", "--json", json},
            {"bench-read", ref, broken, "--repeat", "1"},
            {"bench-read", broken, ref, "--repeat", "1"},
        };
        for (const std::vector<std::string>& args : runs) {
            CAPTURE(c.layout.name);
            CAPTURE(c.written);
            CAPTURE(args[0] + " " + args[1] + " " + args[2] + " " + args[3]);
            std::filesystem::remove(json);
            const CliRun run = run_accuracy_cli(args);
            CHECK(run.status == 2);
            CHECK(run.err.find("wideattn accuracy " + args[0] + ": error: " + unwritten_text(broken, c.rows)) !=
                  std::string::npos);
            CHECK_FALSE(std::filesystem::exists(json));
        }
    }
    // The complete dump reads as before.
    CHECK(run_accuracy_cli({"kl", ref, ref, "--json", json}).status == 0);
    CHECK(run_accuracy_cli({"gate", ref, ref, "--baseline", ref, "--json", json}).status == 0);
    CHECK(read_text(json).find("\"verdict\":\"ACCEPT\"") != std::string::npos);
    CHECK(run_accuracy_cli({"bench-read", ref, ref, "--repeat", "1"}).status == 0);
}

TEST_CASE("unwritten rows: gaps, chunks that split rows, many ranges and a single row are named as they are") {
    silence_hdf5_errors();
    TempDir dir;
    const std::string gaps = dir.file("gaps.h5");
    write_partial_dump(gaps, kChunked, {{0, 4}, {8, 2}, {14, 2}});
    CHECK(open_error(gaps).find(unwritten_text(gaps, "rows 4..7, 10..13 (8 of 16)")) != std::string::npos);

    // Chunks of 4 rows x 16 columns: rows 4..7 lack their last column chunk only.
    const std::string split = dir.file("split.h5");
    write_partial_dump(split, {"split", 4, 16}, {{0, 4}, {4, 4, 0, 32}, {8, 8}});
    CHECK(open_error(split).find(unwritten_text(split, "rows 4..7 (4 of 16)")) != std::string::npos);

    // Every other row, in chunks of one row: the first five ranges are named, the rest counted.
    std::vector<Block> even_rows;
    for (int64_t t = 0; t < kTokens; t += 2) even_rows.push_back({t, 1});
    const std::string alternate = dir.file("alternate.h5");
    write_partial_dump(alternate, {"rows", 1}, even_rows);
    CHECK(open_error(alternate).find(unwritten_text(alternate, "rows 1, 3, 5, 7, 9 and 3 more ranges (8 of 16)")) !=
          std::string::npos);

    const std::string one = dir.file("one.h5");
    write_partial_dump(one, {"rows", 1}, {{0, 5}, {6, 10}});
    const std::string error = open_error(one);
    CHECK(error.find("'" + one + "' dataset 'logits': row 5 (1 of 16) was never written: the file holds no data for "
                     "it (chunks missing from the chunk index)") != std::string::npos);
    CHECK(error.find("before writing it leaves such a file") != std::string::npos);

    // Chunks allocated at creation hold fill values: no storage is missing (the values show it).
    const std::string early = dir.file("early.h5");
    write_partial_dump(early, {"early", kChunkRows, kVocab, false, true}, {{0, kWrittenRows}});
    CHECK(open_error(early).empty());
}

TEST_CASE("unwritten rows: token ids never written are refused too, naming the dataset") {
    silence_hdf5_errors();
    TempDir dir;
    const std::string path = dir.file("tokens.h5");
    write_complete_dump(path, logits_of_row);
    {
        H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
        const hsize_t dims[1] = {kTokens}, chunk[1] = {4}, half[1] = {kWrittenRows}, start[1] = {0};
        H5Handle space(H5Screate_simple(1, dims, nullptr));
        H5Handle props(H5Pcreate(H5P_DATASET_CREATE));
        REQUIRE(H5Pset_chunk(props.get(), 1, chunk) >= 0);
        H5Handle tokens(H5Dcreate2(file.get(), kTokensDataset, H5T_STD_I32LE, space.get(), H5P_DEFAULT, props.get(),
                                   H5P_DEFAULT));
        REQUIRE(tokens.valid());
        const std::vector<int32_t> ids(kWrittenRows, 3);
        H5Handle file_space(H5Dget_space(tokens.get()));
        REQUIRE(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, half, nullptr) >= 0);
        H5Handle memory_space(H5Screate_simple(1, half, nullptr));
        REQUIRE(H5Dwrite(tokens.get(), H5T_NATIVE_INT32, memory_space.get(), file_space.get(), H5P_DEFAULT,
                         ids.data()) >= 0);
    }
    const std::string message = "'" + path + "' dataset 'tokens': rows 8..15 (8 of 16) were never written";
    CHECK_THROWS_WITH_AS(LogitDumpReader(path).read_tokens(), doctest::Contains(message.c_str()), AccuracyError);
    const std::string ref = dir.file("reference.h5");
    write_complete_dump(ref, logits_of_row);
    const CliRun run = run_accuracy_cli({"kl", ref, path});
    CHECK(run.status == 2);
    CHECK(run.err.find(message) != std::string::npos);
}

TEST_CASE("rows of one value: refused naming the rows, in every argument position; read, warned of, when allowed") {
    silence_hdf5_errors();
    TempDir dir;
    const std::string ref = dir.file("reference.h5");
    write_complete_dump(ref, logits_of_row);
    // Rows 8..15 zero: a zeroed buffer written out, the fill values of a contiguous dataset
    // written in part (its space is allocated whole), and of chunks allocated early.
    const std::string zeroed = dir.file("zeroed.h5");
    write_complete_dump(zeroed, [](int64_t t) {
        return t < kWrittenRows ? logits_of_row(t) : std::vector<float>(kVocab, 0.0f);
    });
    const std::string contiguous = dir.file("contiguous_part.h5");
    write_partial_dump(contiguous, kContiguous, {{0, kWrittenRows}});
    const std::string early = dir.file("early.h5");
    write_partial_dump(early, {"early", kChunkRows, kVocab, true, true}, {{0, kWrittenRows}});
    const std::string rows = "rows 8..15 (8 of 16) hold one value each (every logit 0 in row 8): no model gives such "
                             "rows; the fill values of rows never written, a zeroed buffer or a failed copy do "
                             "(--allow-constant-rows reads them, for synthetic dumps)";
    for (const std::string& path : {zeroed, contiguous, early}) {
        CAPTURE(path);
        const std::string message = constant_text(path, rows);
        CHECK(drift_error(ref, path) == message);
        CHECK(drift_error(path, ref) == message);
        CHECK(drift_error(ref, ref, path) == message);
        DriftOptions split;
        split.threads = 3;
        split.block_rows = 3;
        CHECK(drift_error(ref, path, "", split) == message);
        for (const std::vector<std::string>& args :
             {std::vector<std::string>{"kl", ref, path}, std::vector<std::string>{"kl", path, ref},
              std::vector<std::string>{"gate", ref, ref, "--baseline", path, "--json", dir.file("g.json")},
              std::vector<std::string>{"gate", ref, path, "--budget", "1", "--json", dir.file("g.json")},
              std::vector<std::string>{"bench-read", ref, path, "--repeat", "1"}}) {
            CAPTURE(args[0]);
            const CliRun run = run_accuracy_cli(args);
            CHECK(run.status == 2);
            CHECK(run.err.find(message) != std::string::npos);
        }
        CHECK_FALSE(std::filesystem::exists(dir.file("g.json")));

        DriftOptions allow;
        allow.allow_constant_rows = true;
        const DriftReport report = compute_drift(ref, ref, path, allow);
        REQUIRE(report.baseline_info.warnings.size() == 1);
        CHECK(report.baseline_info.warnings[0] ==
              constant_text(path, "rows 8..15 (8 of 16) hold one value each (every logit 0 in row 8): read as "
                                  "uniform distributions (--allow-constant-rows)"));
        CHECK(report.reference_info.warnings.empty());
        CHECK(report.baseline_kl[kWrittenRows] > 0.0);
        CHECK(run_accuracy_cli({"kl", ref, path, "--allow-constant-rows"}).status == 0);
        CHECK(run_accuracy_cli({"bench-read", ref, path, "--repeat", "1", "--allow-constant-rows"}).status == 0);
        const std::string json = dir.file("allowed.json");
        const CliRun allowed = run_accuracy_cli({"gate", ref, path, "--budget", "100", "--allow-constant-rows",
                                                 "--json", json});
        CHECK(allowed.status == 0);
        CHECK(read_text(json).find("hold one value each") != std::string::npos);
        std::filesystem::remove(json);
    }
    CHECK(run_accuracy_cli({"kl", ref, zeroed, "--allow-constant-rows", "--allow-constant-rows"}).status == 2);

    // One row of another value; a one-logit vocabulary, where every row is one value, is not counted.
    const std::string single = dir.file("single.h5");
    write_complete_dump(single, [](int64_t t) { return t == 5 ? std::vector<float>(kVocab, 3.5f) : logits_of_row(t); });
    CHECK(drift_error(ref, single).find(constant_text(single, "row 5 (1 of 16) holds one value (every logit 3.5 in "
                                                              "row 5)")) == 0);
    const std::string narrow = dir.file("narrow.h5");
    write_complete_dump(narrow, [](int64_t t) { return std::vector<float>(1, static_cast<float>(t)); }, kTokens, 1);
    CHECK(drift_error(narrow, narrow).empty());
}

TEST_CASE("rows of one value: the first row at fault decides which error is reported") {
    silence_hdf5_errors();
    TempDir dir;
    const std::string ref = dir.file("reference.h5");
    write_complete_dump(ref, logits_of_row);
    // A NaN at row 3 comes before the zero rows 8..15.
    const std::string nan_first = dir.file("nan_first.h5");
    write_complete_dump(nan_first, [](int64_t t) {
        std::vector<float> row = t < kWrittenRows ? logits_of_row(t) : std::vector<float>(kVocab, 0.0f);
        if (t == 3) row[7] = std::numeric_limits<float>::quiet_NaN();
        return row;
    });
    CHECK(drift_error(ref, nan_first).find("'" + nan_first + "' row 3 column 7: logit is NaN") == 0);
    // Zero rows 2..3 come before a NaN at row 10 of the reference: they are reported, and the
    // rows after the NaN are said to be unchecked.
    const std::string ref_nan = dir.file("reference_nan.h5");
    write_complete_dump(ref_nan, [](int64_t t) {
        std::vector<float> row = logits_of_row(t);
        if (t == 10) row[0] = std::numeric_limits<float>::quiet_NaN();
        return row;
    });
    const std::string zero_first = dir.file("zero_first.h5");
    write_complete_dump(zero_first, [](int64_t t) {
        return t == 2 || t == 3 || t == 12 ? std::vector<float>(kVocab, 0.0f) : logits_of_row(t);
    });
    DriftOptions one_row_blocks;
    one_row_blocks.block_rows = 1;
    for (const DriftOptions& options : {DriftOptions{}, one_row_blocks}) {
        const std::string error = drift_error(ref_nan, zero_first, "", options);
        CHECK(error.find(constant_text(zero_first, "rows 2..3 (2 of 16) hold one value each (every logit 0 in "
                                                   "row 2)")) == 0);
        CHECK(error.find("; rows from 10 on were not checked (another error there)") != std::string::npos);
    }
}

TEST_CASE("unwritten rows: the fuzz seed corpus's dumps of crashed writers are refused naming their rows") {
    const char* data = std::getenv("WIDEATTN_TEST_DATA");
    if (data == nullptr) return;
    const std::filesystem::path corpus = std::filesystem::path(data) / ".." / "tests/fuzz/corpus/logit_dump";
    const struct {
        const char* file;
        const char* message;
    } cases[] = {
        {"unwritten_contiguous.h5", "dataset 'logits': rows 0..15 (16 of 16) were never written"},
        {"unwritten_chunked.h5", "dataset 'logits': rows 0..15 (16 of 16) were never written"},
        {"unwritten_rows_8_15.h5", "dataset 'logits': rows 8..15 (8 of 16) were never written"},
        {"unwritten_gzip.h5", "dataset 'logits': rows 0..15 (16 of 16) were never written"},
        {"unwritten_rows_8_15_gzip.h5", "dataset 'logits': rows 8..15 (8 of 16) were never written"},
    };
    for (const auto& c : cases) {
        const std::string path = (corpus / c.file).string();
        CAPTURE(path);
        REQUIRE(std::filesystem::exists(path));
        CHECK(open_error(path).find(std::string(c.file) + "' " + c.message) != std::string::npos);
    }
    const std::string zeroed = (corpus / "constant_rows_8_15.h5").string();
    REQUIRE(std::filesystem::exists(zeroed));
    CHECK(open_error(zeroed).empty());
    CHECK(drift_error(zeroed, zeroed).find("constant_rows_8_15.h5' dataset 'logits': rows 8..15 (8 of 16) hold one "
                                           "value each (every logit 0 in row 8)") != std::string::npos);
}
