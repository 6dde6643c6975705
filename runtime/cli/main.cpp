#include "runtime/cli/cli.hpp"

int main(int argc, char** argv) { return zt::cli_main(argc, argv); }
