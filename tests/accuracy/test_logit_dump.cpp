// test_logit_dump.cpp - logit dump writer/reader round trips, float16 conversion, and every
// malformed-file error of the reader, and its direct (pread) row reads against H5Dread.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <hdf5.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "accuracy/accuracy_error.h"
#include "accuracy/bf16.h"
#include "accuracy/float16.h"
#include "accuracy/hdf5_util.h"
#include "accuracy/logit_dump.h"
#include "accuracy_test_util.h"

using namespace wideattn::accuracy;
using wideattn::accuracy::testing::random_row;
using wideattn::accuracy::testing::TempDir;
using wideattn::accuracy::testing::write_bytes;

namespace {

std::string error_of(const std::string& path) {
    try {
        LogitDumpReader reader(path);
    } catch (const AccuracyError& e) {
        return e.what();
    }
    return "";
}

void write_dump(const std::string& path, int64_t tokens, int64_t vocab, LogitType type, int64_t chunk_rows = 0) {
    LogitDumpWriter writer(path, vocab, type, {"m", "v", "e"}, chunk_rows);
    for (int64_t t = 0; t < tokens; ++t) {
        const std::vector<float> row = random_row(static_cast<uint64_t>(t) + 100, vocab, -8.0, 8.0);
        writer.append_rows(row.data(), 1);
    }
    writer.close();
}

// In a child process that ends without closing it: a dump in the newest file format, whose
// superblock then keeps the flags of a file open for writing (as after a writer that crashed).
void write_dump_left_open(const std::string& path) {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        H5Handle access(H5Pcreate(H5P_FILE_ACCESS));
        H5Pset_libver_bounds(access.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
        const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get());
        const hsize_t dims[2] = {2, 8};
        const hid_t space = H5Screate_simple(2, dims, nullptr);
        const hid_t dataset = H5Dcreate2(file, "logits", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        const std::vector<float> row(16, 1.0f);
        H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, row.data());
        H5Fflush(file, H5F_SCOPE_GLOBAL);
        _exit(dataset >= 0 ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
}

// A file with one 2-D dataset of the given HDF5 type, named `name`.
void write_raw_dataset(const std::string& path, const char* name, hid_t type, int rank) {
    H5Handle file = create_hdf5_file(path);
    const hsize_t dims[3] = {3, 4, 2};
    H5Handle space(H5Screate_simple(rank, dims, nullptr));
    H5Handle dataset(H5Dcreate2(file.get(), name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    REQUIRE(dataset.valid());
}

}  // namespace

TEST_CASE("float16 conversion is exact for every binary16 value") {
    for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
        const float value = float16_to_float(static_cast<uint16_t>(bits));
        if (std::isnan(value)) {
            CHECK(std::isnan(float16_to_float(float_to_float16(value))));
            continue;
        }
        const uint16_t back = float_to_float16(value);
        if (back != bits) {
            CAPTURE(bits);
            CHECK(back == bits);
        }
    }
    CHECK(float16_to_float(0x3c00) == 1.0f);
    CHECK(float16_to_float(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
    CHECK(float_to_float16(65520.0f) == 0x7c00);                 // rounds to inf
    CHECK(float_to_float16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie to even
    CHECK(float_to_float16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
}

TEST_CASE("logit dump round trip in every type, with tokens and metadata") {
    TempDir dir;
    for (LogitType type : {LogitType::kFloat32, LogitType::kFloat16, LogitType::kBFloat16}) {
        CAPTURE(logit_type_name(type));
        const std::string path = dir.file(std::string("dump_") + logit_type_name(type) + ".h5");
        const int64_t tokens = 13, vocab = 37;
        std::vector<float> rows = random_row(9, tokens * vocab, -20.0, 20.0);
        for (auto& x : rows) {  // make every value representable in the stored type
            if (type == LogitType::kFloat16) x = float16_to_float(float_to_float16(x));
            if (type == LogitType::kBFloat16) x = wideattn::bf16_to_float(wideattn::float_to_bf16(x));
        }
        rows[5] = -std::numeric_limits<float>::infinity();
        std::vector<int32_t> ids(tokens);
        for (int64_t t = 0; t < tokens; ++t) ids[t] = static_cast<int32_t>((t * 7) % vocab);
        {
            LogitDumpWriter writer(path, vocab, type, {"gemma", "bf16 \"ref\"", "engine-x"}, 4);
            writer.append_rows(rows.data(), 6);
            writer.append_rows(rows.data() + 6 * vocab, tokens - 6);
            writer.write_tokens(ids);
            writer.close();
        }
        LogitDumpReader reader(path);
        CHECK(reader.info().tokens == tokens);
        CHECK(reader.info().vocab == vocab);
        CHECK(reader.info().type == type);
        CHECK(reader.info().chunk_rows == 4);
        CHECK(reader.info().has_tokens);
        CHECK(reader.info().metadata.model == "gemma");
        CHECK(reader.info().metadata.variant == "bf16 \"ref\"");
        CHECK(reader.info().metadata.engine == "engine-x");
        CHECK(reader.read_tokens() == ids);
        std::vector<float> back(static_cast<size_t>(tokens * vocab));
        reader.read_rows(0, tokens, back.data());
        CHECK(std::memcmp(back.data(), rows.data(), back.size() * sizeof(float)) == 0);
        std::vector<double> some(static_cast<size_t>(3 * vocab));
        reader.read_rows(5, 3, some.data());
        for (int64_t i = 0; i < 3 * vocab; ++i) REQUIRE(some[i] == static_cast<double>(rows[5 * vocab + i]));
        CHECK_THROWS_AS(reader.read_rows(tokens - 1, 2, back.data()), AccuracyError);
    }
}

TEST_CASE("logit dump: default chunking targets about 256 KiB and at least one row") {
    TempDir dir;
    write_dump(dir.file("wide.h5"), 2, 300000, LogitType::kFloat32);
    CHECK(LogitDumpReader(dir.file("wide.h5")).info().chunk_rows == 1);
    write_dump(dir.file("narrow.h5"), 2, 1024, LogitType::kFloat16);
    CHECK(LogitDumpReader(dir.file("narrow.h5")).info().chunk_rows == 128);
}

TEST_CASE("logit dump reader: clear errors for bad files") {
    wideattn::accuracy::silence_hdf5_errors();
    TempDir dir;

    CHECK(error_of(dir.file("absent.h5")).find("cannot open") != std::string::npos);

    write_bytes(dir.file("text.h5"), "this is not an HDF5 file, just some text\n");
    CHECK(error_of(dir.file("text.h5")).find("not an HDF5 file") != std::string::npos);

    write_bytes(dir.file("zero.h5"), "");
    CHECK(error_of(dir.file("zero.h5")).find("empty") != std::string::npos);

    write_dump(dir.file("whole.h5"), 20, 1000, LogitType::kFloat32);
    std::filesystem::copy_file(dir.file("whole.h5"), dir.file("truncated.h5"));
    std::filesystem::resize_file(dir.file("truncated.h5"), std::filesystem::file_size(dir.file("whole.h5")) / 2);
    const std::string truncated = error_of(dir.file("truncated.h5"));
    CHECK(truncated.find("truncated") != std::string::npos);
    CHECK(truncated.find("truncated.h5") != std::string::npos);

    write_raw_dataset(dir.file("other.h5"), "activations", H5T_IEEE_F32LE, 2);
    CHECK(error_of(dir.file("other.h5")).find("no dataset 'logits'") != std::string::npos);

    write_raw_dataset(dir.file("rank3.h5"), "logits", H5T_IEEE_F32LE, 3);
    CHECK(error_of(dir.file("rank3.h5")).find("2-D") != std::string::npos);

    write_raw_dataset(dir.file("int.h5"), "logits", H5T_STD_I32LE, 2);
    CHECK(error_of(dir.file("int.h5")).find("unsupported element type") != std::string::npos);

    write_raw_dataset(dir.file("u16.h5"), "logits", H5T_STD_U16LE, 2);  // no dtype="bfloat16"
    CHECK(error_of(dir.file("u16.h5")).find("unsupported element type") != std::string::npos);

    // bfloat16 bits viewed as float16 (torch's view(torch.float16)), marked as bfloat16: they would
    // read as other numbers, so the contradiction is refused rather than read as float16.
    H5Handle binary16(H5Tcopy(H5T_IEEE_F32LE));
    H5Tset_fields(binary16.get(), 15, 10, 5, 0, 10);
    H5Tset_size(binary16.get(), 2);
    H5Tset_ebias(binary16.get(), 15);
    write_raw_dataset(dir.file("f16_marked_bf16.h5"), "logits", binary16.get(), 2);
    {
        H5Handle file(H5Fopen(dir.file("f16_marked_bf16.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
        H5Handle dataset(H5Dopen2(file.get(), "logits", H5P_DEFAULT));
        write_string_attribute(dataset.get(), "dtype", "bfloat16");
    }
    CHECK(error_of(dir.file("f16_marked_bf16.h5")).find("'logits' is IEEE float16 but has dtype=\"bfloat16\"") !=
          std::string::npos);

    {
        LogitDumpWriter writer(dir.file("no_rows.h5"), 10, LogitType::kFloat32, {});
        writer.close();
    }
    CHECK(error_of(dir.file("no_rows.h5")).find("empty dump") != std::string::npos);
}

TEST_CASE("logit dump reader: a file a writer still has open is named as such, not as corrupt") {
    wideattn::accuracy::silence_hdf5_errors();
    TempDir dir;
    write_dump(dir.file("open.h5"), 4, 16, LogitType::kFloat32);
    {
        // The lock an HDF5 writer holds (h5py.File(..., "w") before it is closed).
        const char* locking = std::getenv("HDF5_USE_FILE_LOCKING");
        const std::string saved = locking != nullptr ? locking : "";
        unsetenv("HDF5_USE_FILE_LOCKING");
        const int fd = open(dir.file("open.h5").c_str(), O_RDWR);
        REQUIRE(fd >= 0);
        REQUIRE(flock(fd, LOCK_EX | LOCK_NB) == 0);
        const std::string locked = error_of(dir.file("open.h5"));
        close(fd);
        if (locking != nullptr) setenv("HDF5_USE_FILE_LOCKING", saved.c_str(), 1);
        CHECK(locked.find("'" + dir.file("open.h5") + "' is locked by a program that has it open for writing") !=
              std::string::npos);
    }
    CHECK(error_of(dir.file("open.h5")).empty());

    write_dump_left_open(dir.file("left_open.h5"));
    const std::string left_open = error_of(dir.file("left_open.h5"));
    CHECK(left_open.find("'" + dir.file("left_open.h5") + "' is marked as still open for writing") != std::string::npos);
    CHECK(left_open.find("h5clear -s") != std::string::npos);
}

TEST_CASE("logit dump reader: token ids must fit the dump") {
    TempDir dir;
    const std::string path = dir.file("bad_tokens.h5");
    {
        LogitDumpWriter writer(path, 8, LogitType::kFloat32, {});
        const std::vector<float> rows(16, 0.0f);
        writer.append_rows(rows.data(), 2);
        writer.write_tokens({3, 8});  // 8 is outside the vocab
    }
    LogitDumpReader reader(path);
    CHECK_THROWS_WITH_AS(reader.read_tokens(), doctest::Contains("tokens'[1] = 8"), AccuracyError);

    const std::string short_path = dir.file("short_tokens.h5");
    {
        LogitDumpWriter writer(short_path, 8, LogitType::kFloat32, {});
        const std::vector<float> rows(16, 0.0f);
        writer.append_rows(rows.data(), 2);
        writer.write_tokens({3});
    }
    CHECK_THROWS_WITH_AS(LogitDumpReader(short_path).read_tokens(), doctest::Contains("2 entries"), AccuracyError);
}

namespace {

// A float32 `logits` dataset [tokens, vocab] holding `rows`, contiguous (chunk_rows 0) or in
// chunks of chunk_rows x chunk_cols (optionally deflate-compressed). Dumps with rows never
// written: test_unwritten_rows.cpp.
void write_float32_layout(const std::string& path, int64_t tokens, int64_t vocab, const std::vector<float>& rows,
                          hsize_t chunk_rows, hsize_t chunk_cols, bool deflate) {
    H5Handle file = create_hdf5_file(path);
    const hsize_t dims[2] = {static_cast<hsize_t>(tokens), static_cast<hsize_t>(vocab)};
    H5Handle space(H5Screate_simple(2, dims, nullptr));
    H5Handle create_props(H5Pcreate(H5P_DATASET_CREATE));
    if (chunk_rows > 0) {
        const hsize_t chunk[2] = {chunk_rows, chunk_cols};
        REQUIRE(H5Pset_chunk(create_props.get(), 2, chunk) >= 0);
        if (deflate) REQUIRE(H5Pset_deflate(create_props.get(), 4) >= 0);
    }
    H5Handle dataset(H5Dcreate2(file.get(), "logits", H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, create_props.get(),
                                H5P_DEFAULT));
    REQUIRE(dataset.valid());
    REQUIRE(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) >= 0);
}

// Rows [first, first + count) of `reader`, as floats.
std::vector<float> rows_of(LogitDumpReader& reader, int64_t first, int64_t count) {
    std::vector<float> out(static_cast<size_t>(count * reader.info().vocab), std::nanf(""));
    reader.read_rows(first, count, out.data());
    return out;
}

}  // namespace

TEST_CASE("logit dump reader: direct reads equal H5Dread, and are used only where the layout allows") {
    wideattn::accuracy::silence_hdf5_errors();
    TempDir dir;
    const int64_t tokens = 10, vocab = 37;
    const std::vector<float> rows = random_row(77, tokens * vocab, -30.0, 30.0);
    const auto expect_rows = [&](LogitDumpReader& reader) {
        for (int64_t first = 0; first < tokens; ++first)
            for (int64_t count = 1; first + count <= tokens; ++count) {
                CAPTURE(first);
                CAPTURE(count);
                const std::vector<float> got = rows_of(reader, first, count);
                REQUIRE(std::memcmp(got.data(), rows.data() + first * vocab, got.size() * sizeof(float)) == 0);
            }
        CHECK_THROWS_WITH_AS(rows_of(reader, tokens - 2, 3), doctest::Contains("outside 0..10"), AccuracyError);
    };
    // The writer's layout: chunks of 3 whole rows, holding the first `count` of `rows`.
    const auto write_rows = [&](const std::string& path, int64_t count) {
        LogitDumpWriter writer(path, vocab, LogitType::kFloat32, {}, 3);
        writer.append_rows(rows.data(), count);
    };

    SUBCASE("the writer's layout (chunks of 3 whole rows, the last one partly past the end)") {
        const std::string path = dir.file("writer.h5");
        write_rows(path, tokens);
        LogitDumpReader reader(path);
        CHECK(reader.direct_reads());
        expect_rows(reader);
        reader.set_chunk_cache(false);
        CHECK(reader.direct_reads());
        expect_rows(reader);
        reader.set_direct_reads(false);
        CHECK_FALSE(reader.direct_reads());
        expect_rows(reader);
    }
    SUBCASE("contiguous") {
        write_float32_layout(dir.file("contiguous.h5"), tokens, vocab, rows, 0, 0, false);
        LogitDumpReader reader(dir.file("contiguous.h5"));
        CHECK(reader.direct_reads());
        expect_rows(reader);
    }
    SUBCASE("compressed chunks: through H5Dread") {
        write_float32_layout(dir.file("deflate.h5"), tokens, vocab, rows, 4, static_cast<hsize_t>(vocab), true);
        LogitDumpReader reader(dir.file("deflate.h5"));
        CHECK_FALSE(reader.direct_reads());
        expect_rows(reader);
    }
    SUBCASE("chunks that split rows: through H5Dread") {
        write_float32_layout(dir.file("split.h5"), tokens, vocab, rows, 2, 16, false);
        LogitDumpReader reader(dir.file("split.h5"));
        CHECK_FALSE(reader.direct_reads());
        expect_rows(reader);
    }
    SUBCASE("float16 and bfloat16 dumps: through H5Dread") {
        write_dump(dir.file("half.h5"), 3, vocab, LogitType::kFloat16);
        write_dump(dir.file("brain.h5"), 3, vocab, LogitType::kBFloat16);
        CHECK_FALSE(LogitDumpReader(dir.file("half.h5")).direct_reads());
        CHECK_FALSE(LogitDumpReader(dir.file("brain.h5")).direct_reads());
    }
    SUBCASE("another reader of the same file shares the layout and reads the same rows, also alone") {
        const std::string path = dir.file("shared.h5");
        write_rows(path, tokens);
        std::unique_ptr<LogitDumpReader> second;
        {
            LogitDumpReader first(path);
            REQUIRE(first.direct_reads());
            second = first.another_reader();
            CHECK(second->info().tokens == tokens);
            CHECK(second->info().vocab == vocab);
            CHECK(second->direct_reads());
            expect_rows(*second);
        }
        expect_rows(*second);  // the descriptor outlives the reader that opened it
        second->set_chunk_cache(false);
        expect_rows(*second);
    }
    SUBCASE("another reader of a file replaced since the first opened it: a clear error") {
        const std::string path = dir.file("replaced.h5"), replacement = dir.file("replacement.h5");
        write_rows(path, tokens);
        write_rows(replacement, tokens - 1);
        LogitDumpReader first(path);
        std::filesystem::rename(replacement, path);
        CHECK_THROWS_WITH_AS(first.another_reader(),
                             doctest::Contains("changed while open: logits [9, 37] float32 in chunks of 3 rows, was "
                                               "[10, 37] float32 in chunks of 3 rows"),
                             AccuracyError);
        expect_rows(first);  // the first reader still reads the file it opened
    }
    SUBCASE("another reader of a file without direct reads reads through H5Dread too") {
        write_float32_layout(dir.file("deflate2.h5"), tokens, vocab, rows, 4, static_cast<hsize_t>(vocab), true);
        LogitDumpReader first(dir.file("deflate2.h5"));
        const std::unique_ptr<LogitDumpReader> second = first.another_reader();
        CHECK_FALSE(second->direct_reads());
        expect_rows(*second);
    }
    SUBCASE("a file cut short after it was opened: a clear error naming the file") {
        const std::string path = dir.file("cut.h5");
        write_rows(path, tokens);
        LogitDumpReader reader(path);
        REQUIRE(reader.direct_reads());
        std::filesystem::resize_file(path, 2048);
        CHECK_THROWS_WITH_AS(rows_of(reader, tokens - 1, 1), doctest::Contains("truncated file"), AccuracyError);
        CHECK_THROWS_WITH_AS(rows_of(reader, tokens - 1, 1), doctest::Contains("cut.h5"), AccuracyError);
    }
}

TEST_CASE("logit dump reader: more than kMaxDirectChunks chunks read through H5Dread (the lookups cost the square)") {
    wideattn::accuracy::silence_hdf5_errors();
    TempDir dir;
    const int64_t vocab = 4;
    for (const int64_t tokens : {LogitDumpReader::kMaxDirectChunks, LogitDumpReader::kMaxDirectChunks + 1}) {
        CAPTURE(tokens);
        const std::vector<float> rows = random_row(static_cast<uint64_t>(tokens), tokens * vocab, -30.0, 30.0);
        const std::string path = dir.file("rows_" + std::to_string(tokens) + ".h5");
        {
            LogitDumpWriter writer(path, vocab, LogitType::kFloat32, {}, 1);
            writer.append_rows(rows.data(), tokens);
        }
        LogitDumpReader reader(path);
        CHECK(reader.direct_reads() == (tokens <= LogitDumpReader::kMaxDirectChunks));
        const std::vector<float> got = rows_of(reader, 0, tokens);
        CHECK(std::memcmp(got.data(), rows.data(), got.size() * sizeof(float)) == 0);
    }
}
