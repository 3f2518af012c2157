// accuracy_cli.cpp - the `wideattn accuracy ...` subcommands: kl, gate, attn-error,
// make-sample, make-attn-sample, bench-read. Usage in docs/accuracy.md and in each --help.
// Exit codes: 0 success / accept, 1 reject (gate, attn-error over its bound), 2 error,
// 3 inconclusive (gate, paired rule: too few tokens to decide at the margin).
#include "accuracy/accuracy_cli.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <new>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

#include "accuracy/accuracy_error.h"
#include "accuracy/attn_error_file.h"
#include "accuracy/drift_report.h"
#include "accuracy/gate.h"
#include "accuracy/hdf5_util.h"
#include "accuracy/kl_drift.h"
#include "accuracy/output_path.h"
#include "accuracy/progress.h"
#include "accuracy/read_bench.h"
#include "accuracy/sample_dumps.h"

namespace wideattn::accuracy {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitReject = 1;
constexpr int kExitError = 2;
constexpr const char* kDefaultGateReport = "accuracy_gate_report.json";
constexpr double kBenchRatioBar = 1.5;
constexpr int64_t kBenchRssBarKib = 512 * 1024;

class UsageError : public AccuracyError {
public:
    using AccuracyError::AccuracyError;
};

const char* const kTopHelp =
    "usage: wideattn accuracy <subcommand> [options]\n"
    "\n"
    "subcommands:\n"
    "  kl REF CAND [--baseline BASE] [--json FILE]      KL drift statistics of CAND vs REF\n"
    "  gate REF CAND (--baseline BASE | --budget X) [--rule point|paired] [--margin M]\n"
    "       [--margin-rel R] [--confidence C] [--block-tokens B] [--json FILE]\n"
    "                                                   accept/reject CAND (exit 0/1, 3 inconclusive)\n"
    "  attn-error FILE [--max-rel-l2 X]                 error of a kernel output vs the fp64 reference\n"
    "  make-sample OUTDIR [--tokens N] [--vocab V] [--seed S] [--dtype T] [--roles LIST]\n"
    "                                                   synthetic logit dumps\n"
    "  make-attn-sample FILE [--seed S]                 a small attention case for attn-error\n"
    "  bench-read REF CAND [--repeat N]                 time read-only vs kl, peak RSS\n"
    "\n"
    "Run `wideattn accuracy <subcommand> --help` for details. Exit codes: 0 ok/accept,\n"
    "1 reject, 2 error, 3 inconclusive (gate). Schema of the HDF5 files: docs/accuracy.md.\n";

struct Command {
    const char* name;
    std::vector<const char*> positionals;  // names, for messages
    std::set<std::string> value_options;   // options taking a value
    const char* help;
    std::set<std::string> flag_options = {};  // options taking none
};

constexpr const char* kAllowConstantRows = "--allow-constant-rows";

const Command kKl{"kl", {"REF", "CAND"}, {"--baseline", "--json", "--block-rows", "--threads"},
                  "usage: wideattn accuracy kl REF CAND [--baseline BASE] [--json FILE] [--block-rows N]\n"
                  "                            [--threads N] [--allow-constant-rows]\n"
                  "\n"
                  "Per-token KL(REF || CAND) of two HDF5 logit dumps of the same tokens, in float64,\n"
                  "streamed in row blocks, and the statistics of llama.cpp --kl-divergence: mean +-\n"
                  "stderr, max, percentiles, min, top-1 agreement, and with token ids the delta-p\n"
                  "statistics and RMS delta-p.\n"
                  "  --baseline BASE   also compare BASE to REF, and print the paired per-token\n"
                  "                    difference KL(CAND) - KL(BASE), mean +- stderr\n"
                  "  --json FILE       write the report as JSON (FILE '-': stdout, the text to stderr)\n"
                  "  --block-rows N    rows per read, >= 1 (default: about 1 MB of float per dump; more\n"
                  "                    than the dumps have reads them in one block)\n"
                  "  --threads N       workers, 1..64, each reading and computing blocks (default: the\n"
                  "                    number of hardware threads, at most 8)\n"
                  "  --allow-constant-rows  read rows whose logits all have one value (by default an error:\n"
                  "                    no model gives them, fill values or a zeroed buffer do), with a\n"
                  "                    warning naming them; for synthetic dumps\n"
                  "Rows a dump's file holds no data for (a writer that stopped early) are an error naming\n"
                  "them, whatever the options.\n"
                  "Exit: 0 ok, 2 error (bad input: the message names the file, row or argument).\n",
                  {kAllowConstantRows}};

const Command kGate{"gate", {"REF", "CAND"},
                    {"--baseline", "--budget", "--rule", "--margin", "--margin-rel", "--confidence", "--block-tokens",
                     "--json", "--block-rows", "--threads"},
                    "usage: wideattn accuracy gate REF CAND (--baseline BASE | --budget X) [--rule point|paired]\n"
                    "                              [--margin M] [--margin-rel R] [--confidence C]\n"
                    "                              [--block-tokens B] [--json FILE] [--allow-constant-rows]\n"
                    "\n"
                    "Decides whether CAND's drift KL(REF || CAND) is within what is allowed.\n"
                    "--rule paired (the default with --baseline and no --budget): non-inferiority on the\n"
                    "per-token differences d_t = KL_t(CAND) - KL_t(BASE), margin M + R * mean KL(BASE):\n"
                    "  bounds = mean(d) -+ t(C, blocks - 1) * se(mean d), se by batch means over blocks of\n"
                    "  consecutive tokens; ACCEPT iff upper bound <= margin, REJECT iff lower bound > margin,\n"
                    "  else INCONCLUSIVE, with the tokens that would decide at the observed variance.\n"
                    "--rule point (the default with --budget): budget = base * (1 + R) + M, base = X or the\n"
                    "  mean KL(REF || BASE); ACCEPT iff mean KL(REF || CAND) <= budget.\n"
                    "A baseline whose KL is infinite or NaN at some token is an error (the rows are named).\n"
                    "  --margin M        absolute margin in nats (default 0)\n"
                    "  --margin-rel R    relative margin, fraction of the baseline's mean KL (point rule: of\n"
                    "                    base) (default 0; 0.05 = 5%)\n"
                    "  --confidence C    paired rule: one-sided confidence in [0.5, 1) (default 0.95)\n"
                    "  --block-tokens B  paired rule: tokens per block (default: max(ceil(n^(1/3)), from the\n"
                    "                    lag-1 autocorrelation), at most n/10)\n"
                    "  --json FILE       JSON report path (default ./accuracy_gate_report.json; '-': stdout,\n"
                    "                    the text to stderr)\n"
                    "  --block-rows N, --threads N, --allow-constant-rows   as for kl (rows never written and,\n"
                    "                    without --allow-constant-rows, rows of one value are errors: exit 2)\n"
                    "Prints the verdict (ACCEPT, REJECT or INCONCLUSIVE) and the numbers that decided.\n"
                    "Exit: 0 accept, 1 reject, 2 error, 3 inconclusive.\n",
                    {kAllowConstantRows}};

const Command kAttnError{"attn-error", {"FILE"}, {"--max-rel-l2"},
                         "usage: wideattn accuracy attn-error FILE [--max-rel-l2 X]\n"
                         "\n"
                         "Reads an attention case (q, k_cache, v_cache, cu_seqlens_q, seq_lens_k, block_table,\n"
                         "softmax_scale, the kernel's out and optionally lse; schema in docs/accuracy.md), runs\n"
                         "the fp64 CPU reference and prints mean/max abs error (with token, head, dim), RMS,\n"
                         "relative L2, 1 - cos, non-finite count, per head, and the LSE error.\n"
                         "  --max-rel-l2 X    (>= 0) exit 1 when out's relative L2 error exceeds X or any output\n"
                         "                    is non-finite\n"
                         "Exit: 0 ok, 1 over the bound, 2 error.\n"};

const Command kMakeSample{"make-sample", {"OUTDIR"}, {"--tokens", "--vocab", "--seed", "--dtype", "--roles"},
                          "usage: wideattn accuracy make-sample OUTDIR [--tokens N] [--vocab V] [--seed S]\n"
                          "                                     [--dtype float16|float32|bfloat16] [--roles LIST]\n"
                          "\n"
                          "Writes deterministic synthetic logit dumps OUTDIR/sample_<role>.h5 with LM-like\n"
                          "statistics (Zipf-like rank profile, per-token confidence and noise, softcap 30) and\n"
                          "token ids sampled from the reference: reference; baseline (reference + perturbation\n"
                          "sigma 0.05); candidate_pass (sigma 0.035, passes the baseline gate); candidate_fail\n"
                          "(sigma 0.075, fails it).\n"
                          "  --tokens N   rows, 1..16777216 (default 256)\n"
                          "  --vocab V    columns, 2..4194304 (default 4096)\n"
                          "  --seed S     seed (default 1)        --dtype T   element type (default float16)\n"
                          "  --roles LIST comma-separated subset of reference,baseline,candidate_pass,candidate_fail\n"
                          "Exit: 0 ok, 2 error.\n"};

const Command kMakeAttnSample{"make-attn-sample", {"FILE"}, {"--seed"},
                              "usage: wideattn accuracy make-attn-sample FILE [--seed S]\n"
                              "\n"
                              "Writes a small attention case (2 sequences, 4 query / 2 KV heads, head dim 512,\n"
                              "paged KV with block size 16, bf16 inputs) whose out is the fp64 reference rounded\n"
                              "to bfloat16, for trying attn-error. Exit: 0 ok, 2 error.\n"};

const Command kBenchRead{"bench-read", {"REF", "CAND"}, {"--repeat"},
                         "usage: wideattn accuracy bench-read REF CAND [--repeat N] [--allow-constant-rows]\n"
                         "\n"
                         "Times streaming both dumps through the HDF5 reader alone against `kl REF CAND`\n"
                         "on the same files, alternating N rounds (1..1000, default 3; the machine may be shared);\n"
                         "prints the fastest and median times, the ratio of the fastest (bar: <= 1.5) and\n"
                         "the peak RSS (bar: < 512 MB). --allow-constant-rows: as for kl, in the kl rounds.\n"
                         "Exit: 0 ok, 2 error.\n",
                         {kAllowConstantRows}};

struct ParsedArgs {
    std::vector<std::string> positionals;
    std::map<std::string, std::string> options;
    bool help = false;

    bool has(const std::string& name) const { return options.count(name) != 0; }
    std::string get(const std::string& name, const std::string& fallback = "") const {
        auto it = options.find(name);
        return it == options.end() ? fallback : it->second;
    }
};

ParsedArgs parse_args(const Command& command, int argc, char** argv) {
    ParsedArgs args;
    const std::string context = std::string("'wideattn accuracy ") + command.name + "'";
    for (int i = 2; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            args.help = true;
            return args;
        }
        if (arg.size() > 1 && arg[0] == '-' && arg != "-") {
            if (command.flag_options.count(arg)) {
                if (args.options.count(arg)) throw UsageError("option '" + arg + "' given twice");
                args.options[arg] = "";
                continue;
            }
            if (!command.value_options.count(arg)) throw UsageError("unknown option '" + arg + "' for " + context);
            if (i + 1 >= argc) throw UsageError("option '" + arg + "' of " + context + " needs a value");
            if (args.options.count(arg)) throw UsageError("option '" + arg + "' given twice");
            args.options[arg] = argv[++i];
            continue;
        }
        args.positionals.push_back(arg);
    }
    if (args.positionals.size() < command.positionals.size())
        throw UsageError(std::string("missing argument ") + command.positionals[args.positionals.size()] + " for " +
                         context + " (see --help)");
    if (args.positionals.size() > command.positionals.size())
        throw UsageError("unexpected argument '" + args.positionals[command.positionals.size()] + "' for " + context);
    return args;
}

// A finite number >= minimum (the gate's values are range-checked by validate_gate_policy).
double parse_number(const std::string& option, const std::string& text,
                    double minimum = -std::numeric_limits<double>::infinity()) {
    errno = 0;
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || *end != '\0' || errno == ERANGE ||
        !std::isfinite(value))
        throw UsageError("option '" + option + "': '" + text + "' is not a finite number");
    if (value < minimum) {
        char bound[32];
        std::snprintf(bound, sizeof bound, "%g", minimum);
        throw UsageError("option '" + option + "': '" + text + "' is not a number >= " + bound);
    }
    return value;
}

// A decimal integer in [minimum, maximum], all of `text` (no sign but '-', no spaces), parsed
// without wrapping: '4294967297' is refused for an int option, not read as 1.
int64_t parse_integer(const std::string& option, const std::string& text, int64_t minimum,
                      int64_t maximum = std::numeric_limits<int64_t>::max()) {
    int64_t value = 0;
    const char* begin = text.data();
    const char* end = begin + text.size();
    const std::from_chars_result parsed = std::from_chars(begin, end, value);
    const bool in_range = !text.empty() && parsed.ec == std::errc() && parsed.ptr == end && value >= minimum &&
                          value <= maximum;
    if (in_range) return value;
    const std::string range = maximum == std::numeric_limits<int64_t>::max()
                                  ? ">= " + std::to_string(minimum)
                                  : "in " + std::to_string(minimum) + ".." + std::to_string(maximum);
    throw UsageError("option '" + option + "': '" + text + "' is not an integer " + range);
}

void write_text_file(const std::string& path, const std::string& text) {
    if (path == "-") {
        std::fputs(text.c_str(), stdout);
        return;
    }
    FILE* file = std::fopen(path.c_str(), "w");
    if (!file) throw AccuracyError("cannot write JSON report '" + path + "': " + std::strerror(errno));
    const size_t written = std::fwrite(text.data(), 1, text.size(), file);
    const bool closed = std::fclose(file) == 0;
    if (written != text.size() || !closed) throw AccuracyError("cannot write JSON report '" + path + "'");
}

// Refuses a JSON report path that cannot be written before any dump is read ("-" is stdout).
void check_json_path(const std::string& path) {
    if (path == "-") return;
    const std::string problem = output_path_problem(path);
    if (!problem.empty()) throw AccuracyError("cannot write JSON report '" + path + "': " + problem);
}

// Where the text report goes: stderr when the JSON report takes stdout (`--json -`), so stdout
// holds the JSON alone.
FILE* text_stream(const std::string& json_path) { return json_path == "-" ? stderr : stdout; }

DriftReport run_drift(const ParsedArgs& args, const std::string& label) {
    DriftOptions options;
    if (args.has("--block-rows")) options.block_rows = parse_integer("--block-rows", args.get("--block-rows"), 1);
    if (args.has("--threads"))
        options.threads =
            static_cast<int>(parse_integer("--threads", args.get("--threads"), 1, DriftOptions::kMaxThreads));
    options.allow_constant_rows = args.has(kAllowConstantRows);
    ProgressReporter progress(label);
    options.progress = [&progress](int64_t done, int64_t total) { progress.update(done, total); };
    DriftReport report = compute_drift(args.positionals[0], args.positionals[1], args.get("--baseline"), options);
    progress.finish();
    return report;
}

int run_kl(const ParsedArgs& args) {
    if (args.has("--json")) check_json_path(args.get("--json"));
    const DriftReport report = run_drift(args, "kl");
    std::fputs(format_drift_text(report).c_str(), text_stream(args.get("--json")));
    if (args.has("--json")) write_text_file(args.get("--json"), drift_report_json(report, "kl", nullptr, nullptr));
    return kExitOk;
}

// The gate's policy from the options; the rule defaults to paired with a baseline and no
// stated budget, to point otherwise.
GatePolicy parse_gate_policy(const ParsedArgs& args) {
    GatePolicy policy;
    if (!args.has("--budget") && !args.has("--baseline"))
        throw UsageError("'wideattn accuracy gate' needs --baseline BASE or --budget X");
    policy.source = args.has("--budget") ? BudgetSource::kStated : BudgetSource::kBaseline;
    if (args.has("--budget")) policy.stated_budget = parse_number("--budget", args.get("--budget"));
    policy.rule = policy.source == BudgetSource::kBaseline ? GateRule::kPaired : GateRule::kPoint;
    if (args.has("--rule")) {
        const std::string rule = args.get("--rule");
        if (rule != "point" && rule != "paired")
            throw UsageError("option '--rule': '" + rule + "' is not point or paired");
        policy.rule = rule == "point" ? GateRule::kPoint : GateRule::kPaired;
    }
    if (policy.rule == GateRule::kPaired && args.has("--budget"))
        throw UsageError("--rule paired compares with the baseline: give --baseline BASE and no --budget");
    for (const char* option : {"--confidence", "--block-tokens"})
        if (policy.rule == GateRule::kPoint && args.has(option))
            throw UsageError(std::string("option '") + option + "' applies to --rule paired only");
    if (args.has("--margin")) policy.margin_absolute = parse_number("--margin", args.get("--margin"));
    if (args.has("--margin-rel")) policy.margin_relative = parse_number("--margin-rel", args.get("--margin-rel"));
    if (args.has("--confidence")) policy.confidence = parse_number("--confidence", args.get("--confidence"));
    if (args.has("--block-tokens")) policy.block_tokens = parse_integer("--block-tokens", args.get("--block-tokens"), 1);
    const std::string invalid = validate_gate_policy(policy);
    if (!invalid.empty()) throw UsageError(invalid);
    return policy;
}

int run_gate(const ParsedArgs& args) {
    const GatePolicy policy = parse_gate_policy(args);
    const std::string json_path = args.get("--json", kDefaultGateReport);
    check_json_path(json_path);
    const DriftReport report = run_drift(args, "gate");
    if (report.has_baseline) check_baseline_kl(report.baseline_kl, report.baseline_info.path);
    GateDecision decision;
    if (policy.rule == GateRule::kPaired) {
        decision = decide_paired_gate(policy, report.candidate_kl, report.baseline_kl);
    } else {
        const double baseline_mean = report.has_baseline ? report.baseline_drift.kl.mean : 0.0;
        decision = decide_gate(policy, report.candidate_drift.kl.mean, baseline_mean);
        const NonFiniteRows infinite = find_nonfinite(report.candidate_kl);
        if (infinite.count > 0) decision.reason += "\nthe candidate's KL is +inf at " + infinite.text();
    }
    FILE* text = text_stream(json_path);
    std::fputs(format_drift_text(report).c_str(), text);
    std::fputs("\n", text);
    std::fputs(format_gate_text(decision).c_str(), text);
    write_text_file(json_path, drift_report_json(report, "gate", &policy, &decision));
    if (json_path != "-") std::printf("report: %s\n", json_path.c_str());
    return gate_exit_status(decision.verdict);
}

void print_stats_line(const char* label, const ErrorStats& stats) {
    std::printf("%-8s %s\n", label, format_error_stats(stats).c_str());
}

int run_attn_error(const ParsedArgs& args) {
    const bool bounded = args.has("--max-rel-l2");
    const double bound = bounded ? parse_number("--max-rel-l2", args.get("--max-rel-l2"), 0.0) : 0.0;
    const AttnCase attn_case = read_attn_case(args.positionals[0]);
    const AttnErrorResult result = evaluate_attn_case(attn_case);
    std::printf("case: %s  q [%lld, %lld, %lld]  k_cache [%lld, %lld, %lld, %lld]  sequences %zu  scale %.9g\n",
                args.positionals[0].c_str(), static_cast<long long>(attn_case.q.dims[0]),
                static_cast<long long>(attn_case.q.dims[1]), static_cast<long long>(attn_case.q.dims[2]),
                static_cast<long long>(attn_case.k_cache.dims[0]), static_cast<long long>(attn_case.k_cache.dims[1]),
                static_cast<long long>(attn_case.k_cache.dims[2]), static_cast<long long>(attn_case.k_cache.dims[3]),
                attn_case.seq_lens_k.size(), attn_case.softmax_scale);
    print_stats_line("out", result.out_stats);
    std::printf("max_abs at token %lld head %lld dim %lld\n", static_cast<long long>(result.max_abs_at.token),
                static_cast<long long>(result.max_abs_at.head), static_cast<long long>(result.max_abs_at.dim));
    for (size_t h = 0; h < result.per_head.size(); ++h) {
        const std::string label = "head " + std::to_string(h);
        print_stats_line(label.c_str(), result.per_head[h]);
    }
    if (result.has_lse) print_stats_line("lse", result.lse_stats);
    if (bounded) {
        const bool within = result.out_stats.nonfinite == 0 && result.out_stats.rel_l2 <= bound;
        std::printf("%s: rel_l2 %.3e %s %.3e\n", within ? "OK" : "OVER", result.out_stats.rel_l2,
                    within ? "<=" : ">", bound);
        return within ? kExitOk : kExitReject;
    }
    return kExitOk;
}

std::vector<SampleRole> parse_roles(const std::string& list) {
    std::vector<SampleRole> roles;
    size_t begin = 0;
    while (begin <= list.size()) {
        const size_t end = std::min(list.find(',', begin), list.size());
        const std::string name = list.substr(begin, end - begin);
        SampleRole role;
        if (!parse_sample_role(name, &role))
            throw UsageError("option '--roles': unknown role '" + name +
                             "' (expected reference, baseline, candidate_pass, candidate_fail)");
        roles.push_back(role);
        begin = end + 1;
    }
    return roles;
}

int run_make_sample(const ParsedArgs& args) {
    SampleOptions options;
    if (args.has("--tokens")) options.tokens = parse_integer("--tokens", args.get("--tokens"), 1, kMaxSampleTokens);
    if (args.has("--vocab")) options.vocab = parse_integer("--vocab", args.get("--vocab"), 2, kMaxSampleVocab);
    if (args.has("--seed")) options.seed = static_cast<uint64_t>(parse_integer("--seed", args.get("--seed"), 0));
    if (args.has("--dtype") && !parse_logit_type(args.get("--dtype"), &options.type))
        throw UsageError("option '--dtype': '" + args.get("--dtype") + "' is not float32, float16 or bfloat16");
    if (args.has("--roles")) options.roles = parse_roles(args.get("--roles"));
    ProgressReporter progress("make-sample");
    options.progress = [&progress](int64_t done, int64_t total) { progress.update(done, total); };
    const std::vector<std::string> paths = make_sample_dumps(args.positionals[0], options);
    progress.finish();
    for (const std::string& path : paths) std::printf("wrote %s\n", path.c_str());
    return kExitOk;
}

int run_make_attn_sample(const ParsedArgs& args) {
    const uint64_t seed = args.has("--seed") ? static_cast<uint64_t>(parse_integer("--seed", args.get("--seed"), 0)) : 1;
    write_attn_case(args.positionals[0], make_sample_attn_case(seed));
    std::printf("wrote %s\n", args.positionals[0].c_str());
    return kExitOk;
}

int run_bench_read(const ParsedArgs& args) {
    const int repeats =
        args.has("--repeat") ? static_cast<int>(parse_integer("--repeat", args.get("--repeat"), 1, kMaxBenchRepeats)) : 3;
    const ReadBenchResult result =
        run_read_bench(args.positionals[0], args.positionals[1], repeats, args.has(kAllowConstantRows));
    const double gib = static_cast<double>(result.bytes_read) / (1024.0 * 1024.0 * 1024.0);
    std::printf("rounds    : %d (fastest / median)\n", result.repeats);
    std::printf("read-only : %.3f s / %.3f s (%.2f GiB, %.2f GiB/s)\n", result.read_seconds,
                result.read_median_seconds, gib, gib / result.read_seconds);
    std::printf("kl        : %.3f s / %.3f s (mean KL %.9g)\n", result.kl_seconds, result.kl_median_seconds,
                result.mean_kl);
    std::printf("ratio     : %.3f (bar <= %.1f: %s)\n", result.ratio, kBenchRatioBar,
                result.ratio <= kBenchRatioBar ? "met" : "NOT met");
    std::printf("peak RSS  : %.1f MiB (bar < 512 MiB: %s)\n", static_cast<double>(result.peak_rss_kib) / 1024.0,
                result.peak_rss_kib < kBenchRssBarKib ? "met" : "NOT met");
    return kExitOk;
}

struct Subcommand {
    const Command* command;
    int (*run)(const ParsedArgs&);
};

const Subcommand kSubcommands[] = {{&kKl, run_kl},
                                   {&kGate, run_gate},
                                   {&kAttnError, run_attn_error},
                                   {&kMakeSample, run_make_sample},
                                   {&kMakeAttnSample, run_make_attn_sample},
                                   {&kBenchRead, run_bench_read}};

int report_error(const Subcommand& sub, const std::string& message) {
    std::fprintf(stderr, "wideattn accuracy %s: error: %s\n", sub.command->name, message.c_str());
    return kExitError;
}

// The positional arguments, for messages about failures that name no file themselves.
std::string inputs_text(const ParsedArgs& args) {
    std::string text;
    for (const std::string& positional : args.positionals) text += (text.empty() ? "'" : ", '") + positional + "'";
    return text;
}

}  // namespace

int accuracy_main(int argc, char** argv) {
    silence_hdf5_errors();
    if (argc < 2) {
        std::fputs(kTopHelp, stderr);
        std::fputs("wideattn accuracy: error: missing subcommand (see --help)\n", stderr);
        return kExitError;
    }
    const std::string name = argv[1];
    if (name == "--help" || name == "-h" || name == "help") {
        std::fputs(kTopHelp, stdout);
        return kExitOk;
    }
    for (const Subcommand& sub : kSubcommands) {
        if (name != sub.command->name) continue;
        ParsedArgs args;
        try {
            args = parse_args(*sub.command, argc, argv);
        } catch (const UsageError& e) {
            return report_error(sub, e.what());
        }
        if (args.help) {
            std::fputs(sub.command->help, stdout);
            return kExitOk;
        }
        try {
            return sub.run(args);
        } catch (const AccuracyError& e) {
            return report_error(sub, e.what());
        } catch (const std::bad_alloc&) {
            return report_error(sub, "out of memory (inputs: " + inputs_text(args) + ")");
        } catch (const std::length_error& e) {
            return report_error(sub, "a size derived from the inputs (" + inputs_text(args) + ") is too large (" +
                                         e.what() + ")");
        } catch (const std::exception& e) {
            return report_error(sub, std::string(e.what()) + " (inputs: " + inputs_text(args) + ")");
        }
    }
    std::fprintf(stderr, "wideattn accuracy: error: unknown subcommand '%s' (see --help)\n", name.c_str());
    return kExitError;
}

}  // namespace wideattn::accuracy
