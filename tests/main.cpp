// main.cpp - doctest entry point shared by the CPU and GPU test binaries.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
