// test_accuracy_cli.cpp - `wideattn accuracy` exit codes through accuracy_main: help, usage
// errors, kl/gate on generated samples (accept 0, reject 1), bad files (2), JSON report.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "accuracy/accuracy_cli.h"
#include "accuracy/progress.h"
#include "accuracy_test_util.h"

using wideattn::accuracy::accuracy_main;
using wideattn::accuracy::testing::TempDir;

namespace {

int run(std::initializer_list<std::string> args) {
    std::vector<std::string> storage = {"accuracy"};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& arg : storage) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    return accuracy_main(static_cast<int>(storage.size()), argv.data());
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

TEST_CASE("accuracy CLI: help and usage errors") {
    CHECK(run({"--help"}) == 0);
    CHECK(run({}) == 2);
    CHECK(run({"frobnicate"}) == 2);
    for (const char* sub : {"kl", "gate", "attn-error", "make-sample", "make-attn-sample", "bench-read"})
        CHECK(run({sub, "--help"}) == 0);
    CHECK(run({"kl", "only_one.h5"}) == 2);
    CHECK(run({"kl", "a.h5", "b.h5", "--bogus"}) == 2);
    CHECK(run({"kl", "a.h5", "b.h5", "--json"}) == 2);
    CHECK(run({"kl", "a.h5", "b.h5", "c.h5"}) == 2);
    CHECK(run({"gate", "a.h5", "b.h5"}) == 2);  // neither --budget nor --baseline
    CHECK(run({"gate", "a.h5", "b.h5", "--budget", "abc"}) == 2);
    CHECK(run({"gate", "a.h5", "b.h5", "--budget", "-1"}) == 2);
    CHECK(run({"make-sample", "/tmp", "--tokens", "0"}) == 2);
    CHECK(run({"make-sample", "/tmp", "--dtype", "int8"}) == 2);
    CHECK(run({"make-sample", "/tmp", "--roles", "reference,oracle"}) == 2);
}

TEST_CASE("accuracy CLI: make-sample, kl, gate accept/reject, JSON report") {
    TempDir dir;
    REQUIRE(run({"make-sample", dir.path(), "--tokens", "64", "--vocab", "512", "--seed", "3"}) == 0);
    const std::string ref = dir.file("sample_reference.h5");
    const std::string base = dir.file("sample_baseline.h5");
    const std::string pass = dir.file("sample_candidate_pass.h5");
    const std::string fail = dir.file("sample_candidate_fail.h5");

    CHECK(run({"kl", ref, pass, "--baseline", base, "--json", dir.file("kl.json")}) == 0);
    const std::string kl_json = read_file(dir.file("kl.json"));
    CHECK(kl_json.find("\"command\":\"kl\"") != std::string::npos);
    CHECK(kl_json.find("\"paired_kl_difference\"") != std::string::npos);
    CHECK(kl_json.find("\"gate\"") == std::string::npos);

    CHECK(run({"gate", ref, pass, "--baseline", base, "--json", dir.file("pass.json")}) == 0);
    CHECK(read_file(dir.file("pass.json")).find("\"verdict\":\"ACCEPT\"") != std::string::npos);
    CHECK(run({"gate", ref, fail, "--baseline", base, "--json", dir.file("fail.json")}) == 1);
    CHECK(read_file(dir.file("fail.json")).find("\"verdict\":\"REJECT\"") != std::string::npos);
    // A relative margin large enough turns the fail candidate's reject into an accept.
    CHECK(run({"gate", ref, fail, "--baseline", base, "--margin-rel", "10", "--json", dir.file("m.json")}) == 0);
    CHECK(run({"gate", ref, pass, "--budget", "0", "--json", dir.file("zero.json")}) == 1);
    CHECK(run({"gate", ref, pass, "--budget", "1", "--json", dir.file("one.json")}) == 0);
    CHECK(run({"gate", ref, ref, "--budget", "0", "--json", dir.file("same.json")}) == 0);  // KL exactly 0
}

TEST_CASE("accuracy CLI: bad inputs exit 2") {
    TempDir dir;
    REQUIRE(run({"make-sample", dir.path(), "--tokens", "8", "--vocab", "64", "--roles", "reference,baseline"}) == 0);
    REQUIRE(run({"make-sample", dir.file(""), "--tokens", "8", "--vocab", "64"}) == 0);
    wideattn::accuracy::testing::write_bytes(dir.file("text.h5"), "not hdf5");
    const std::string ref = dir.file("sample_reference.h5");
    CHECK(run({"kl", ref, dir.file("text.h5")}) == 2);
    CHECK(run({"kl", ref, dir.file("absent.h5")}) == 2);
    CHECK(run({"gate", ref, dir.file("absent.h5"), "--budget", "1", "--json", dir.file("x.json")}) == 2);
    // A missing OUTDIR is created; one that cannot be (below a regular file) is an error.
    CHECK(run({"make-sample", dir.file("made/deeper"), "--tokens", "8", "--vocab", "65", "--roles", "reference"}) == 0);
    CHECK(run({"make-sample", dir.file("text.h5/sub"), "--tokens", "8", "--vocab", "65"}) == 2);
    CHECK(run({"attn-error", dir.file("text.h5")}) == 2);
    REQUIRE(run({"make-attn-sample", dir.file("attn.h5")}) == 0);
    CHECK(run({"attn-error", dir.file("attn.h5")}) == 0);
    CHECK(run({"attn-error", dir.file("attn.h5"), "--max-rel-l2", "1e-2"}) == 0);
    CHECK(run({"attn-error", dir.file("attn.h5"), "--max-rel-l2", "1e-9"}) == 1);
}

TEST_CASE("progress lines: the last count is printed once (kl's last block and its end both report it)") {
    TempDir dir;
    const std::string log = dir.file("stderr.txt");
    std::fflush(stderr);
    const int saved = dup(STDERR_FILENO);
    const int file = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(saved >= 0);
    REQUIRE(file >= 0);
    REQUIRE(dup2(file, STDERR_FILENO) == STDERR_FILENO);
    close(file);
    {
        wideattn::accuracy::ProgressReporter progress("gate", 0.0);  // stderr is a file: one line per print
        progress.update(4, 10);
        progress.update(10, 10);
        progress.update(10, 10);
        progress.finish();
    }
    std::fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    const std::string text = read_file(log);
    CHECK(text.find("gate: 4/10 rows") != std::string::npos);
    const size_t last = text.find("gate: 10/10 rows");
    CHECK(last != std::string::npos);
    CHECK(text.find("gate: 10/10 rows", last + 1) == std::string::npos);
}
