// The `ztrain` command line: train and sample. Returns the process exit code; every error ends in
// one message on stderr naming the problem.
#pragma once

namespace zt {

int cli_main(int argc, char** argv);

}  // namespace zt
