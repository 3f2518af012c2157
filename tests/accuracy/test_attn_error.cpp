// test_attn_error.cpp - attention case files: round trip, error statistics against the fp64
// reference (with the (token, head, dim) of the worst element), malformed-case errors, bfloat16
// bits in int16, and sizes that would wrap or that the file does not store.
#include <doctest/doctest.h>

#include <hdf5.h>

#include <cmath>
#include <string>
#include <vector>

#include "accuracy/accuracy_error.h"
#include "accuracy/attn_error_file.h"
#include "accuracy/bf16.h"
#include "accuracy/error_stats.h"
#include "accuracy/hdf5_util.h"
#include "accuracy/logit_dump.h"
#include "accuracy_test_util.h"

using namespace wideattn::accuracy;
using wideattn::accuracy::testing::TempDir;

namespace {

std::string case_error(const std::string& path) {
    try {
        evaluate_attn_case(read_attn_case(path));
    } catch (const AccuracyError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("locate_token_head_dim splits a flat [token][head][dim] index") {
    const TokenHeadDim where = locate_token_head_dim((5 * 4 + 3) * 512 + 77, 4, 512);
    CHECK(where.token == 5);
    CHECK(where.head == 3);
    CHECK(where.dim == 77);
    CHECK(locate_token_head_dim(-1, 4, 512).token == -1);
}

TEST_CASE("sample attention case: bf16-rounded output has bf16-sized error, exact output none") {
    TempDir dir;
    const AttnCase sample = make_sample_attn_case(7);
    write_attn_case(dir.file("case.h5"), sample);
    const AttnCase back = read_attn_case(dir.file("case.h5"));
    CHECK(back.q.dims == sample.q.dims);
    CHECK(back.k_cache.dims == sample.k_cache.dims);
    CHECK(back.block_table == sample.block_table);
    CHECK(back.block_table_stride == 3);
    CHECK(back.softmax_scale == sample.softmax_scale);
    CHECK(back.out.bf16 == sample.out.bf16);
    CHECK(back.has_lse);

    const AttnErrorResult result = evaluate_attn_case(back);
    // Rounding to bf16 (8 significant bits): relative error at most 2^-9 per element.
    CHECK(result.out_stats.nonfinite == 0);
    CHECK(result.out_stats.rel_l2 > 0.0);
    CHECK(result.out_stats.rel_l2 < std::ldexp(1.0, -9));
    CHECK(result.per_head.size() == 4);
    CHECK(result.lse_stats.max_abs < 1e-5);  // float-rounded LSE

    // Replace out by the reference in float32: the error is float rounding only.
    AttnCase exact = back;
    exact.out.type = TensorType::kFloat32;
    exact.out.bf16.clear();
    exact.out.f32.assign(result.reference_out.begin(), result.reference_out.end());
    const AttnErrorResult exact_result = evaluate_attn_case(exact);
    CHECK(exact_result.out_stats.rel_l2 < 1e-7);

    // Corrupt one element: the maximum error is found at its (token, head, dim).
    const int64_t token = 9, head = 2, dim = 300;
    const int64_t index = (token * 4 + head) * 512 + dim;
    exact.out.f32[index] += 0.5f;
    const AttnErrorResult corrupted = evaluate_attn_case(exact);
    CHECK(corrupted.max_abs_at.token == token);
    CHECK(corrupted.max_abs_at.head == head);
    CHECK(corrupted.max_abs_at.dim == dim);
    CHECK(corrupted.out_stats.max_abs == doctest::Approx(0.5).epsilon(1e-6));
    CHECK(corrupted.per_head[2].max_abs > 0.4);
    CHECK(corrupted.per_head[1].max_abs < 1e-6);
    exact.out.f32[index] = NAN;
    CHECK(evaluate_attn_case(exact).out_stats.nonfinite == 1);
}

TEST_CASE("attention case: clear errors for malformed files") {
    TempDir dir;
    AttnCase sample = make_sample_attn_case(3);

    AttnCase wrong_out = sample;
    wrong_out.out.dims = {17, 4, 256};
    wrong_out.out.bf16.resize(17 * 4 * 256);
    write_attn_case(dir.file("out_shape.h5"), wrong_out);
    CHECK(case_error(dir.file("out_shape.h5")).find("must have the shape of q") != std::string::npos);

    AttnCase bad_table = sample;
    bad_table.block_table[1] = 99;
    write_attn_case(dir.file("table.h5"), bad_table);
    CHECK(case_error(dir.file("table.h5")).find("block_table[0][1]=99") != std::string::npos);

    AttnCase bad_lens = sample;
    bad_lens.seq_lens_k[1] = 3;  // fewer keys than query tokens
    write_attn_case(dir.file("lens.h5"), bad_lens);
    CHECK(case_error(dir.file("lens.h5")).find("sequence 1") != std::string::npos);

    {
        H5Handle file = create_hdf5_file(dir.file("partial.h5"));
    }
    CHECK(case_error(dir.file("partial.h5")).find("no dataset 'q'") != std::string::npos);

    wideattn::accuracy::testing::write_bytes(dir.file("junk.h5"), "junk");
    CHECK(case_error(dir.file("junk.h5")).find("not an HDF5 file") != std::string::npos);
}

namespace {

// Replaces dataset `name` of `path` with one of `file_type` holding `data` (as `memory_type`),
// marked dtype="bfloat16" when `bfloat16`.
void replace_dataset(const std::string& path, const char* name, const std::vector<hsize_t>& dims, hid_t file_type,
                     hid_t memory_type, const void* data, bool bfloat16) {
    H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    REQUIRE(file.valid());
    REQUIRE(H5Ldelete(file.get(), name, H5P_DEFAULT) >= 0);
    H5Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
    H5Handle props(H5Pcreate(H5P_DATASET_CREATE));
    if (data == nullptr) {  // declared only: chunked, nothing written
        std::vector<hsize_t> chunk(dims.size(), 1);
        chunk.back() = dims.back();
        REQUIRE(H5Pset_chunk(props.get(), static_cast<int>(chunk.size()), chunk.data()) >= 0);
    }
    H5Handle dataset(H5Dcreate2(file.get(), name, file_type, space.get(), H5P_DEFAULT, props.get(), H5P_DEFAULT));
    REQUIRE(dataset.valid());
    if (data != nullptr) REQUIRE(H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    if (bfloat16) write_string_attribute(dataset.get(), kDtypeAttribute, kBFloat16Name);
}

}  // namespace

TEST_CASE("attention case: bfloat16 bits in int16 are read bit for bit; sizes never wrap") {
    silence_hdf5_errors();
    TempDir dir;
    const AttnCase sample = make_sample_attn_case(5);
    const std::string path = dir.file("int16.h5");
    write_attn_case(path, sample);
    const AttnErrorResult expected = evaluate_attn_case(read_attn_case(path));
    const std::vector<hsize_t> q_dims(sample.q.dims.begin(), sample.q.dims.end());
    replace_dataset(path, "q", q_dims, H5T_STD_I16LE, H5T_NATIVE_INT16, sample.q.bf16.data(), true);
    const AttnCase signed_case = read_attn_case(path);
    CHECK(signed_case.q.bf16 == sample.q.bf16);
    CHECK(evaluate_attn_case(signed_case).out_stats.rel_l2 == expected.out_stats.rel_l2);

    // An int64 cu_seqlens_q value beyond int32 is named, not clamped.
    const std::vector<int64_t> wide = {0, 5, int64_t{1} << 33};
    replace_dataset(path, "cu_seqlens_q", {3}, H5T_STD_I64LE, H5T_NATIVE_INT64, wide.data(), false);
    CHECK(case_error(path).find("dataset 'cu_seqlens_q'[2] = 8589934592 does not fit int32") != std::string::npos);

    // A q declaring 2^50 elements that the file does not store.
    write_attn_case(path, sample);
    replace_dataset(path, "q", {hsize_t{1} << 30, 4, hsize_t{1} << 20}, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, nullptr,
                    false);
    CHECK(case_error(path).find("dataset 'q' [1073741824, 4, 1048576] declares 18014398509481984 bytes of data but "
                                "stores 0") != std::string::npos);
}
