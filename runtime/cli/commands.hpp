// The `ztrain` commands and their flags, declared once: what each flag means, takes and defaults
// to. CLI11 (Debian's libcli11-dev) reads the command line against these declarations and writes
// each command's help (`ztrain CMD --help`, `ztrain help CMD`); the commands read the flags it
// parsed, in command-line order, and check their values (cli_flags.hpp), so a bad one is a usage
// error naming the flag (exit status 2), as before. [Note: the command line]
//
// [Note: the command line] A command's flags come back as (flag, value) pairs in the order given,
// repeats kept (`--set` and `--sweep` repeat; for the others the last wins), a switch with the
// value "true" and an optional value left out as kNoValue, so that `train`'s shortcut flags apply
// in order with the `--set`s they stand for. Unknown arguments and flags without their value are
// named as they were before CLI11 read them ("unknown argument '--x'", "--steps needs a value").
// CLI11 generates no shell completion, so ztrain has none.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zt {

struct FlagSpec {
  enum class Takes { one, repeated, optional, none };
  const char* name;        // "--steps"
  const char* type;        // "N", "FILE", ...; "" for a switch
  const char* help;        // one line of meaning
  const char* fallback;    // the default as the help shows it; nullptr: none
  Takes takes = Takes::one;
};

struct CommandSpec {
  const char* name;     // "train"
  const char* summary;  // one line, for `ztrain --help`
  std::vector<FlagSpec> flags;
  const char* operands = nullptr;  // the name of its operands ("INPUTS"), or none
  const char* operands_help = nullptr;
};

// Every command, in the order `ztrain --help` lists them.
const std::vector<CommandSpec>& command_specs();
const CommandSpec* find_command(std::string_view name);

// The value of an optional-value flag given without one (train's bare --resume).
inline constexpr std::string_view kNoValue = "\x1b";

struct ParsedCommand {
  std::vector<std::pair<std::string, std::string>> flags;  // in command-line order
  std::vector<std::string> operands;
};

// A help text asked for (`--help`, `-h`): printed on standard output, exit status 0.
struct HelpRequested {
  std::string text;
};

// argv[first..] as `cmd`'s flags and operands; throws UsageError (cli_flags.hpp) for an unknown
// argument or a flag without its value, and HelpRequested for --help.
ParsedCommand parse_command(const CommandSpec& cmd, int argc, char** argv, int first);

// `ztrain CMD --help`: the usage line, every flag with its type, meaning and default.
std::string command_help(const CommandSpec& cmd);
// `ztrain --help`: the commands, each with its summary.
std::string global_help();
// The short usage printed after a usage error: the command's usage line (all of them for none).
std::string usage_line(const CommandSpec* cmd);

}  // namespace zt
