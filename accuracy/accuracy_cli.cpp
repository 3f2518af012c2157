// accuracy_cli.cpp - the `wideattn accuracy ...` subcommands.
#include "accuracy/accuracy_cli.h"

#include <cstdio>

namespace wideattn::accuracy {

int accuracy_main(int argc, char** argv) {
    (void)argc;
    (void)argv;
    std::fprintf(stderr, "wideattn accuracy: no subcommands are built yet\n");
    return 2;
}

}  // namespace wideattn::accuracy
