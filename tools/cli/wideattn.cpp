// wideattn.cpp - the `wideattn` command line tool: dispatches to the subcommands.
#include <cstdio>
#include <cstring>
#include <string>

#include "accuracy/accuracy_cli.h"
#include "tools/cli/cli_common.h"
#include "tools/cli/subcommands.h"
#include "wideattn.h"

namespace {

void print_help() {
    std::printf(
        "usage: wideattn <command> [options]   (wideattn <command> --help for each)\n\n"
        "commands:\n"
        "  inspect    list the kernel bundle: kernels, archs, tiles, threads, shared memory, registers\n"
        "  selftest   on a GPU: run every kernel the device supports against the fp64 reference\n"
        "  bench      time the kernels on the Gemma 4 global-layer suite against the mma.sync rate\n"
        "  tune       on a GPU: time every kernel per shape class and write the tuning file\n"
        "  plan       what the dispatcher would launch for the bench cases on a given arch and SM count\n"
        "  accuracy   error statistics, KL drift of logit dumps, and the acceptance gate\n"
        "  version    print the library version\n");
}

// `wideattn version [--help]`: any other argument is a usage error.
int version_main(int argc, char** argv) {
    wideattn::cli::ArgReader args("version", argc, argv);
    while (args.next()) {
        if (args.is("--help") || args.is("-h")) {
            std::printf("usage: wideattn version\n\nPrints the library version.\n");
            return 0;
        }
        args.report_unknown();
        return 2;
    }
    std::printf("wideattn %s\n", wideattn_version());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
        print_help();
        return argc < 2 ? 2 : 0;
    }
    const std::string command = argv[1];
    if (command == "inspect") return wideattn::cli::inspect_main(argc - 1, argv + 1);
    if (command == "selftest") return wideattn::cli::selftest_main(argc - 1, argv + 1);
    if (command == "bench") return wideattn::cli::bench_main(argc - 1, argv + 1);
    if (command == "tune") return wideattn::cli::tune_main(argc - 1, argv + 1);
    if (command == "plan") return wideattn::cli::plan_main(argc - 1, argv + 1);
    if (command == "accuracy") return wideattn::accuracy::accuracy_main(argc - 1, argv + 1);
    if (command == "version") return version_main(argc - 1, argv + 1);
    std::fprintf(stderr, "wideattn: unknown command '%s' (see wideattn --help)\n", command.c_str());
    return 2;
}
