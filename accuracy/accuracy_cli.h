// accuracy_cli.h - entry point of the `wideattn accuracy ...` subcommands.
#pragma once

namespace wideattn::accuracy {

// argv[0] is "accuracy"; returns the process exit code (0 ok/accept, 1 reject, 2 error).
int accuracy_main(int argc, char** argv);

}  // namespace wideattn::accuracy
