// plan.cpp - `wideattn plan`: what the dispatcher would launch for the cases of `wideattn bench`
// on a device described by its arch and SM count, without a GPU: the kernel, the split count,
// the merge kernel, the workspace, and the key ranges of the splits (wideattn_plan_launch and
// kernels/common/split_range.h, the arithmetic the split kernels run).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "accuracy/json_writer.h"
#include "kernels/common/split_range.h"
#include "tools/cli/bench_suite.h"
#include "tools/cli/cli_common.h"
#include "tools/cli/subcommands.h"

namespace wideattn::cli {
namespace {

constexpr const char* kSuitePrefill = "prefill";
constexpr const char* kSuiteDecode = "decode";
constexpr const char* kSuiteAll = "all";
constexpr const char* kDefaultArch = "sm_90a";
constexpr long long kDefaultSms = 132;       // H100 SXM and H200
constexpr long long kMaxSms = 1 << 16;
// A case of one's own (--context): its sequences, new tokens and cached keys, and the block-table
// entries its host problem may hold (the plan builds the table on the host).
constexpr long long kMaxSeqs = 1 << 16;
constexpr long long kMaxQLen = 1 << 20;
constexpr long long kMaxContext = 1 << 26;
constexpr long long kMaxTableEntries = 1LL << 26;
constexpr long long kMaxHeads = 1 << 12;
// The addresses the planned calls name: nothing reads them (wideattn_plan_launch checks shapes,
// alignment and overlap only), so each tensor gets its own range above kPlaceholderBase.
constexpr uint64_t kPlaceholderBase = uint64_t{1} << 44;
constexpr uint64_t kPlaceholderAlign = uint64_t{1} << 20;

struct PlanOptions {
    std::string bundle_flag, json_path, cases_flag, kernel_flag;
    std::string suite = kSuiteAll;
    std::string arch = kDefaultArch;
    bool cases_given = false, suite_given = false, e4m3_kv = false, e4m3_q = false, v_transposed = false,
         k_from_v = false;
    long long sms = kDefaultSms, splits = 0;
    // --seqs, --q-len, --context, --heads: a case of one's own (context < 0: none).
    long long seqs = 1, q_len = 1, context = -1, q_heads = kGemma4QHeads, kv_heads = kGemma4KvHeads;
    bool shape_given = false;  // --seqs, --q-len or --heads given
};

// The case of --seqs, --q-len, --context and --heads: `seqs` sequences of `q_len` new tokens
// after `context` cached keys each.
BenchCase custom_case(const PlanOptions& o) {
    BenchCase c;
    c.name = "custom_" + std::to_string(o.seqs) + "x" + std::to_string(o.q_len) + "_ctx_" + std::to_string(o.context);
    c.q_lens.assign(static_cast<size_t>(o.seqs), static_cast<int32_t>(o.q_len));
    c.contexts.assign(static_cast<size_t>(o.seqs), static_cast<int32_t>(o.context));
    c.hq = static_cast<int32_t>(o.q_heads);
    c.hkv = static_cast<int32_t>(o.kv_heads);
    c.decode = o.q_len == 1;
    return c;
}

// "HQ,HKV" of --heads into *o; false when it is not two integers in 1..kMaxHeads, HKV dividing HQ.
bool parse_heads(const std::string& text, PlanOptions* o) {
    const size_t comma = text.find(',');
    if (comma == std::string::npos) return false;
    long long hq = 0, hkv = 0;
    const std::string a = text.substr(0, comma), b = text.substr(comma + 1);
    const auto digits = [](const std::string& t) {
        return !t.empty() && t.size() <= 5 && t.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(a) || !digits(b)) return false;
    hq = std::stoll(a);
    hkv = std::stoll(b);
    if (hq < 1 || hkv < 1 || hq > kMaxHeads || hkv > kMaxHeads || hq % hkv != 0) return false;
    o->q_heads = hq;
    o->kv_heads = hkv;
    return true;
}

// The compute capability of an arch name (sm_90a -> 9.0, sm_89 -> 8.9, sm_120a -> 12.0); false
// when `arch` is not sm_ followed by two or three digits and an optional 'a'.
bool arch_capability(const std::string& arch, int* major, int* minor) {
    if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return false;
    std::string digits = arch.substr(3);
    if (digits.back() == 'a') digits.pop_back();
    if (digits.size() < 2 || digits.size() > 3) return false;
    for (char c : digits)
        if (c < '0' || c > '9') return false;
    *major = std::stoi(digits.substr(0, digits.size() - 1));
    *minor = digits.back() - '0';
    return *major > 0;
}

// Hands out distinct aligned addresses of the byte sizes asked for.
class PlaceholderSpace {
  public:
    void* take(uint64_t bytes) {
        const uint64_t at = next_;
        next_ += (bytes + kPlaceholderAlign) / kPlaceholderAlign * kPlaceholderAlign;
        return reinterpret_cast<void*>(static_cast<uintptr_t>(at));
    }

  private:
    uint64_t next_ = kPlaceholderBase;
};

// The keys of each split of `kv_end` keys over `splits` ranges of whole granules, in split order
// (none for an unsplit call).
std::vector<int64_t> split_keys(int64_t kv_end, int64_t granule, int32_t splits) {
    std::vector<int64_t> sizes;
    for (int32_t z = 0; splits > 1 && z < splits; ++z) {
        const SplitRange r = split_range(kv_end, granule, z, splits);
        sizes.push_back(r.end - r.begin);
    }
    return sizes;
}

// Split sizes as "COUNT x KEYS" for each size, in the order the sizes first appear ("-" for none).
std::string split_sizes_text(const std::vector<int64_t>& sizes) {
    std::vector<std::pair<int64_t, int32_t>> counts;  // (keys, splits of that many keys)
    for (int64_t keys : sizes) {
        auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == keys; });
        if (it == counts.end())
            counts.push_back({keys, 1});
        else
            ++it->second;
    }
    std::string text;
    for (const auto& [keys, count] : counts)
        text += (text.empty() ? "" : ", ") + std::to_string(count) + " x " + std::to_string(keys);
    return text.empty() ? "-" : text;
}

struct PlanRow {
    std::string case_name, kernel, merge, error;
    int32_t total_q = 0, num_seqs = 0, max_seqlen_k = 0, num_splits = 1;
    int64_t workspace_bytes = 0;
    std::vector<int64_t> split_keys;
};

// The plan of case number `c` for the options' variant into *row ("" or the library's refusal in
// row->error).
void plan_case(wideattn_context* ctx, const PlanOptions& o, int cc_major, int cc_minor, const BenchCase& bc, size_t c,
               PlanRow* row) {
    const HostProblem h = bench_problem(bc, c);
    row->case_name = bc.name;
    row->total_q = h.total_q;
    row->num_seqs = static_cast<int32_t>(h.spec.q_lens.size());
    row->max_seqlen_k = max_seqlen_k(h);
    BenchVariant variant;
    variant.kernel = o.kernel_flag;
    variant.e4m3_kv = o.e4m3_kv;
    variant.e4m3_q = o.e4m3_q;
    variant.v_transposed = o.v_transposed;
    variant.k_from_v = o.k_from_v;
    PlaceholderSpace space;
    const uint64_t kv_bytes = static_cast<uint64_t>(h.kv_elements()) * (o.e4m3_kv ? 1 : sizeof(uint16_t));
    const uint64_t q_bytes = static_cast<uint64_t>(h.out_elements()) * (o.e4m3_q ? 1 : sizeof(uint16_t));
    CaseAddresses a;
    a.q = space.take(q_bytes);
    a.k = space.take(kv_bytes);
    a.v = space.take(kv_bytes);
    a.o = space.take(static_cast<uint64_t>(h.out_elements()) * sizeof(uint16_t));
    a.lse = space.take(static_cast<uint64_t>(h.lse_elements()) * sizeof(float));
    a.cu_seqlens_q = static_cast<const int32_t*>(space.take(h.cu_seqlens_q.size() * sizeof(int32_t)));
    a.seq_lens_k = static_cast<const int32_t*>(space.take(h.seq_lens_k.size() * sizeof(int32_t)));
    a.block_table = static_cast<const int32_t*>(space.take(h.block_table.size() * sizeof(int32_t)));
    a.q_scale = a.k_scale = a.v_scale = static_cast<const float*>(space.take(sizeof(float)));
    const wideattn_k_from_v k_from_v = gemma4_k_from_v(static_cast<const float*>(space.take(
        static_cast<uint64_t>(h.spec.head_dim) * sizeof(float))));
    a.k_from_v = &k_from_v;
    wideattn_prefill_params p = variant_params(h, a, variant, false);
    p.num_splits = static_cast<int32_t>(o.splits);
    // Planned twice: the first plan names the workspace the call asks for, the second runs with it
    // (as bench attaches the workspace wideattn_workspace_size asks for), so it splits and merges.
    wideattn_launch_plan plan{};
    for (int pass = 0; pass < 2; ++pass) {
        if (wideattn_plan_launch(ctx, &p, cc_major, cc_minor, static_cast<int>(o.sms), &plan) != WIDEATTN_OK) {
            row->error = wideattn_last_error();
            return;
        }
        if (plan.workspace_bytes <= 0) break;
        p.workspace = space.take(static_cast<uint64_t>(plan.workspace_bytes));
        p.workspace_bytes = plan.workspace_bytes;
    }
    wideattn_kernel_info info{};
    if (wideattn_get_kernel_info(ctx, plan.kernel_index, &info) != WIDEATTN_OK) {
        row->error = wideattn_last_error();
        return;
    }
    row->kernel = info.name;
    wideattn_kernel_info merge{};
    if (plan.merge_kernel_index >= 0 && wideattn_get_kernel_info(ctx, plan.merge_kernel_index, &merge) == WIDEATTN_OK)
        row->merge = merge.name;
    row->num_splits = plan.num_splits;
    row->workspace_bytes = plan.workspace_bytes;
    row->split_keys = split_keys(row->max_seqlen_k, split_granule(info.tile_keys, h.spec.block_size), row->num_splits);
}

void print_help() {
    std::printf(
        "usage: wideattn plan [--bundle DIR] [--arch sm_XX] [--sms N] [--suite prefill|decode|all]\n"
        "                     [--cases A,B,...] [--context N [--seqs N] [--q-len N] [--heads HQ,HKV]]\n"
        "                     [--kv-dtype bf16|e4m3] [--q-dtype bf16|e4m3] [--v-transposed] [--k-from-v]\n"
        "                     [--kernel NAME] [--splits N] [--json FILE]\n\n"
        "Prints what the dispatcher would launch for the cases of `wideattn bench` (the Gemma 4 31B\n"
        "global-layer suites: Hq 32, Hkv 4, D 512, page 16, the bench's max_seqlen_q / max_seqlen_k\n"
        "hints), or for a case of one's own (--context), on a device of that arch and SM count,\n"
        "without a GPU (wideattn_plan_launch: the selection, the split rule and the workspace; a\n"
        "tuning file in force applies where its compute capability matches the arch). Per case:\n"
        "the kernel, the split count (with the workspace wideattn_workspace_size asks for), the\n"
        "merge kernel, the workspace bytes, and the keys of the splits of the longest sequence's\n"
        "last query tile as 'COUNT x KEYS' for each size, in the order the sizes first appear\n"
        "(kernels/common/split_range.h: whole granules of lcm(the kernel's tile keys, the page\n"
        "size), in the form the build option split_ranges names: rounded shares, the last split\n"
        "the rest, or spread evenly).\n"
        "The calls name addresses nothing reads; no memory is allocated. Exit status 1 when the\n"
        "library refuses a case (its message is printed in the row), 2 on a usage error.\n\n"
        "  --bundle DIR     bundle directory (default: $WIDEATTN_BUNDLE, the build tree's, the installed one)\n"
        "  --arch A         the device's arch (default %s): sm_ and its compute capability, e.g.\n"
        "                   sm_89, sm_90a, sm_120a\n"
        "  --sms N          the device's SM count (default %lld: H100 SXM, H200), 1..%lld\n"
        "  --suite S        prefill, decode or all (default): the cases of `wideattn bench --suite S`\n"
        "  --cases LIST     comma-separated case names of either suite (`wideattn bench --list`)\n"
        "  --context N      plan one case of its own instead: --seqs sequences (default 1, 1..%lld) of\n"
        "                   --q-len new tokens (default 1, 1..%lld) after N cached keys each (0..%lld),\n"
        "                   --heads HQ,HKV query and KV heads (default %d,%d); head dim 512, page 16;\n"
        "                   not with --cases or --suite\n"
        "  --kv-dtype T     bf16 (default) or e4m3 K/V with per-tensor scales\n"
        "  --q-dtype T      bf16 (default) or e4m3 Q (with --kv-dtype e4m3)\n"
        "  --v-transposed   V in the transposed layout (WIDEATTN_FLAG_V_TRANSPOSED; with --kv-dtype e4m3)\n"
        "  --k-from-v       K-from-V calls (WIDEATTN_FLAG_K_FROM_V, k_cache NULL, Gemma 4's description)\n"
        "  --kernel NAME    plan with this prefill kernel pinned (wideattn_set_prefill_kernel)\n"
        "  --splits N       num_splits of every call: 0 (default) the library's choice, 1 never split,\n"
        "                   2..%d exactly that many\n"
        "  --json FILE      also write the plans as JSON: arch, sms, and per case: case, total_q,\n"
        "                   num_seqs, max_seqlen_k, kernel, num_splits, merge_kernel, workspace_bytes,\n"
        "                   split_keys (the keys of each split, in order), or error\n",
        kDefaultArch, kDefaultSms, kMaxSms, kMaxSeqs, kMaxQLen, kMaxContext, kGemma4QHeads, kGemma4KvHeads,
        WIDEATTN_MAX_SPLITS);
}

// Reads an option with a value; false after printing a usage error.
bool value_option(ArgReader& args, PlanOptions* o) {
    const std::string option = args.arg();
    std::string text;
    if (!args.value(&text)) return false;
    if (option == "--kv-dtype" || option == "--q-dtype") {
        if (!parse_e4m3_dtype("plan", option, text, option == "--kv-dtype" ? &o->e4m3_kv : &o->e4m3_q)) return false;
    } else if (option == "--suite") {
        if (text != kSuitePrefill && text != kSuiteDecode && text != kSuiteAll) {
            std::fprintf(stderr, "wideattn plan: --suite='%s' is not %s, %s or %s\n", text.c_str(), kSuitePrefill,
                         kSuiteDecode, kSuiteAll);
            return false;
        }
        o->suite = text;
        o->suite_given = true;
    } else if (option == "--heads") {
        if (!parse_heads(text, o)) {
            std::fprintf(stderr, "wideattn plan: --heads='%s' is not HQ,HKV (query and KV heads, 1..%lld, HKV dividing "
                         "HQ)\n", text.c_str(), kMaxHeads);
            return false;
        }
        o->shape_given = true;
    } else if (option == "--arch") {
        int major = 0, minor = 0;
        if (!arch_capability(text, &major, &minor)) {
            std::fprintf(stderr, "wideattn plan: --arch='%s' is not an arch name such as sm_90a or sm_89\n",
                         text.c_str());
            return false;
        }
        o->arch = text;
    } else if (option == "--cases") {
        o->cases_flag = text;
        o->cases_given = true;
    } else if (option == "--bundle") {
        o->bundle_flag = text;
    } else if (option == "--json") {
        o->json_path = text;
    } else if (option == "--kernel") {
        o->kernel_flag = text;
    }
    return true;
}

// Reads the arguments into *o. Returns -1 to go on, or the exit status: 0 after --help, 2 on a
// usage error (printed).
int parse_options(int argc, char** argv, PlanOptions* o) {
    ArgReader args("plan", argc, argv);
    while (args.next()) {
        if (args.is("--help") || args.is("-h")) {
            print_help();
            return 0;
        } else if (args.is("--kv-dtype") || args.is("--q-dtype") || args.is("--suite") || args.is("--arch") ||
                   args.is("--cases") || args.is("--bundle") || args.is("--json") || args.is("--kernel") ||
                   args.is("--heads")) {
            if (!value_option(args, o)) return 2;
        } else if (args.is("--seqs")) {
            if (!args.int_value(1, kMaxSeqs, &o->seqs)) return 2;
            o->shape_given = true;
        } else if (args.is("--q-len")) {
            if (!args.int_value(1, kMaxQLen, &o->q_len)) return 2;
            o->shape_given = true;
        } else if (args.is("--context")) {
            if (!args.int_value(0, kMaxContext, &o->context)) return 2;
        } else if (args.is("--sms")) {
            if (!args.int_value(1, kMaxSms, &o->sms)) return 2;
        } else if (args.is("--splits")) {
            if (!args.int_value(0, WIDEATTN_MAX_SPLITS, &o->splits)) return 2;
        } else if (args.is("--v-transposed")) {
            o->v_transposed = true;
        } else if (args.is("--k-from-v")) {
            o->k_from_v = true;
        } else {
            args.report_unknown();
            return 2;
        }
    }
    if (o->e4m3_q && !o->e4m3_kv) {
        std::fprintf(stderr, "wideattn plan: --q-dtype e4m3 needs --kv-dtype e4m3\n");
        return 2;
    }
    if (o->v_transposed && !o->e4m3_kv) {
        std::fprintf(stderr, "wideattn plan: --v-transposed is a layout of e4m3 V: it needs --kv-dtype e4m3\n");
        return 2;
    }
    if (o->context < 0 && o->shape_given) {
        std::fprintf(stderr, "wideattn plan: --seqs, --q-len and --heads describe a case of --context keys: give "
                     "--context\n");
        return 2;
    }
    if (o->context >= 0 && (o->cases_given || o->suite_given)) {
        std::fprintf(stderr, "wideattn plan: --context describes one case of its own; not with --cases or --suite\n");
        return 2;
    }
    const long long pages = (o->context + o->q_len + kBenchBlockSize - 1) / kBenchBlockSize;
    if (o->context >= 0 && o->seqs * pages > kMaxTableEntries) {
        std::fprintf(stderr, "wideattn plan: --seqs=%lld sequences of --context=%lld + --q-len=%lld keys need %lld "
                     "block-table entries, more than the %lld this tool builds\n", o->seqs, o->context, o->q_len,
                     o->seqs * pages, kMaxTableEntries);
        return 2;
    }
    return -1;
}

bool write_json(const PlanOptions& o, const std::vector<PlanRow>& rows) {
    accuracy::JsonWriter w;
    w.begin_object();
    w.key("arch");
    w.value(o.arch);
    w.key("sms");
    w.value(static_cast<int64_t>(o.sms));
    w.key("cases");
    w.begin_array();
    for (const PlanRow& r : rows) {
        w.begin_object();
        w.key("case");
        w.value(r.case_name);
        w.key("total_q");
        w.value(static_cast<int64_t>(r.total_q));
        w.key("num_seqs");
        w.value(static_cast<int64_t>(r.num_seqs));
        w.key("max_seqlen_k");
        w.value(static_cast<int64_t>(r.max_seqlen_k));
        if (!r.error.empty()) {
            w.key("error");
            w.value(r.error);
        } else {
            w.key("kernel");
            w.value(r.kernel);
            w.key("num_splits");
            w.value(static_cast<int64_t>(r.num_splits));
            w.key("merge_kernel");
            w.value(r.merge);
            w.key("workspace_bytes");
            w.value(r.workspace_bytes);
            w.key("split_keys");
            w.begin_array();
            for (int64_t keys : r.split_keys) w.value(keys);
            w.end_array();
        }
        w.end_object();
    }
    w.end_array();
    w.end_object();
    std::ofstream out(o.json_path);
    out << w.text() << "\n";
    if (!out) {
        std::fprintf(stderr, "wideattn plan: cannot write --json '%s'\n", o.json_path.c_str());
        return false;
    }
    return true;
}

}  // namespace

int plan_main(int argc, char** argv) {
    PlanOptions o;
    if (const int status = parse_options(argc, argv, &o); status >= 0) return status;
    std::vector<BenchCase> cases;
    if (o.context >= 0) {
        cases.push_back(custom_case(o));
    } else if (o.cases_given) {
        if (!named_cases(o.cases_flag, "plan", "wideattn bench --list", &cases)) return 2;
    } else {
        if (o.suite != kSuiteDecode) cases = gemma4_suite();
        if (o.suite != kSuitePrefill)
            for (const BenchCase& c : gemma4_decode_bench_suite()) cases.push_back(c);
    }
    if (!o.json_path.empty() && !output_writable("plan", "--json", o.json_path)) return 2;
    int cc_major = 0, cc_minor = 0;
    arch_capability(o.arch, &cc_major, &cc_minor);
    wideattn_context* ctx = open_bundle(resolve_bundle_dir(o.bundle_flag, argv[0]), "plan");
    if (!ctx) return 2;
    if (!o.kernel_flag.empty() && wideattn_set_prefill_kernel(ctx, o.kernel_flag.c_str()) != WIDEATTN_OK) {
        std::fprintf(stderr, "wideattn plan: --kernel: %s\n", wideattn_last_error());
        wideattn_close(ctx);
        return 2;
    }
    std::printf("plan for %s with %lld SMs; q %s, kv %s%s%s%s\n", o.arch.c_str(), o.sms, o.e4m3_q ? "e4m3" : "bf16",
                o.e4m3_kv ? "e4m3" : "bf16", o.v_transposed ? ", V transposed" : "", o.k_from_v ? ", K from V" : "",
                o.kernel_flag.empty() ? "" : (", kernel " + o.kernel_flag + " pinned").c_str());
    std::printf("%-26s %8s %5s %-24s %4s %-24s %10s  %s\n", "case", "total_q", "seqs", "kernel", "spl", "merge",
                "workspace", "keys per split (longest sequence)");
    std::vector<PlanRow> rows;
    int failures = 0;
    for (size_t c = 0; c < cases.size(); ++c) {
        PlanRow row;
        plan_case(ctx, o, cc_major, cc_minor, cases[c], c, &row);
        if (!row.error.empty()) {
            std::printf("%-26s error: %s\n", row.case_name.c_str(), row.error.c_str());
            ++failures;
        } else {
            std::printf("%-26s %8d %5d %-24s %4d %-24s %10lld  %s\n", row.case_name.c_str(), row.total_q,
                        row.num_seqs, row.kernel.c_str(), row.num_splits, row.merge.empty() ? "-" : row.merge.c_str(),
                        static_cast<long long>(row.workspace_bytes), split_sizes_text(row.split_keys).c_str());
        }
        rows.push_back(row);
    }
    wideattn_close(ctx);
    if (!o.json_path.empty() && !write_json(o, rows)) return 2;
    return failures ? 1 : 0;
}

}  // namespace wideattn::cli
