// subcommands.h - entry points of the `wideattn` subcommands (argv[0] is the subcommand).
#pragma once

namespace wideattn::cli {

int inspect_main(int argc, char** argv);
int selftest_main(int argc, char** argv);
int bench_main(int argc, char** argv);
int tune_main(int argc, char** argv);
int plan_main(int argc, char** argv);

}  // namespace wideattn::cli
