#include "runtime/cli/commands.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>
#include <memory>

#include "runtime/cli/cli_flags.hpp"

namespace zt {

namespace {

using T = FlagSpec::Takes;

constexpr const char* kConfigHelp =
    "the run's JSON configuration: DeepSpeed's keys plus model, data and train (`ztrain config --list` lists them)";
constexpr const char* kSetHelp =
    "overrides a config key, e.g. zero_optimization.stage=3 (the value read as JSON when it parses, else as a string)";

std::vector<CommandSpec> make_specs() {
  return {
      {"train",
       "train or fine-tune a model (under mpirun: every rank runs it)",
       {{"--config", "FILE", kConfigHelp, nullptr},
        {"--set", "KEY=VALUE", kSetHelp, nullptr, T::repeated},
        {"--init-from", "PATH", "model.init_from: start from an llm.c file, a Hugging Face folder, a GGUF file or a ztrain checkpoint", nullptr},
        {"--train-data", "GLOB", "data.train: the training data (token shards, or files and folders for bytes and chat data)", nullptr},
        {"--steps", "N", "train.steps: optimizer steps, 1 to 2147483647", nullptr},
        {"--seed", "N", "train.seed: the initialisation and data seed, any 64-bit unsigned integer", nullptr},
        {"--metrics", "FILE", "train.metrics: a JSON line per step and per validation", nullptr},
        {"--trace", "FILE", "train.trace: a Chrome trace of the run, a lane per collective", nullptr},
        {"--plot", "FILE.png", "when the run ends, draw the loss and validation loss against the step from train.metrics", nullptr},
        {"--resume", "[DIR]", "train.resume: continue from a checkpoint (a step folder or a root's latest); alone: checkpoint.dir", nullptr, T::optional}}},
      {"sample",
       "generate text from a model or a checkpoint",
       {{"--checkpoint", "PATH", "an llm.c file, a ztrain checkpoint (folder or root), a Hugging Face folder or a GGUF file", nullptr},
        {"--prompt", "TEXT", "the text to continue (a chat's user turn with --chat true)", "a new line"},
        {"--tokenizer", "PATH", "a tokenizer.json (or its folder), a GGUF file or a .tiktoken file", "the model file's or its run's"},
        {"--chat", "true|false", "render the prompt as a user turn with the chat template and print the answer", "false"},
        {"--chat-template", "chatml|llama3", "the chat template", "chatml"},
        {"--system", "TEXT", "a system message before the prompt, with --chat true", nullptr},
        {"--tokens", "N", "the most tokens to generate, 0 to 2147483647", "200"},
        {"--top-k", "K", "sample among the K most likely tokens (1: greedy)", "40"},
        {"--top-p", "P", "of those, the fewest whose probabilities reach P, in (0, 1]", "1"},
        {"--temperature", "X", "a finite number >= 0 (0: greedy)", "1"},
        {"--seed", "N", "the sampling seed, any 64-bit unsigned integer", "1337"}}},
      {"estimate",
       "memory per rank of a step at ZeRO stages 0-3, before anything runs",
       {{"--config", "FILE", kConfigHelp, nullptr},
        {"--world-size", "N", "the ranks, 1 to 16777216", "1"},
        {"--ranks-per-host", "N", "ranks on a host (hybrid sharding's default group), 1 to 16777216", "the world size"},
        {"--set", "KEY=VALUE", kSetHelp, nullptr, T::repeated},
        {"--format", "table|json", "the output", "table"}}},
      {"simulate",
       "a step's time, exposed communication, memory and MFU on a described cluster",
       {{"--config", "FILE", kConfigHelp, nullptr},
        {"--cluster", "FILE", "the cluster: devices, links and efficiencies (bench/clusters/ has examples)", nullptr},
        {"--world-size", "N", "the ranks, 1 to 16777216", "1"},
        {"--set", "KEY=VALUE", kSetHelp, nullptr, T::repeated},
        {"--trace", "FILE", "the simulated step as a Chrome trace", nullptr},
        {"--format", "table|json", "the output", "table"}}},
      {"bench",
       "time a sweep of config values (default ZeRO stages 0-3) in one job, a table of step time, MFU and memory",
       {{"--config", "FILE", kConfigHelp, nullptr},
        {"--sweep", "KEY=V1,V2,...", "a config key's values, a row each; several --sweeps cross", "zero_optimization.stage=0,1,2,3",
         T::repeated},
        {"--set", "KEY=VALUE", kSetHelp, nullptr, T::repeated},
        {"--steps", "N", "timed steps a point, 1 to 100000", "3"},
        {"--warmup", "N", "untimed steps before them, 0 to 100000", "1"},
        {"--format", "table|json|csv", "the output", "table"},
        {"--out", "FILE.json", "also write the rows as JSON", nullptr},
        {"--plot", "FILE.png", "draw the rows (time and memory by category)", nullptr},
        {"--cluster", "FILE", "add ztrain simulate's step on that cluster to each row", nullptr},
        {"--peers", "", "add PyTorch DDP, FSDP2 and DeepSpeed ZeRO 0-3 rows (scripts/install-peers.sh)", nullptr, T::none},
        {"--python", "PATH", "the peers' Python", "the venv scripts/install-peers.sh makes"}}},
      {"export",
       "write a checkpoint's model (or a LoRA run's adapters) for other tools",
       {{"--checkpoint", "DIR", "a ztrain checkpoint: a step folder, or a root (its latest)", nullptr},
        {"--format", "hf|safetensors|llmc|peft",
         "a Hugging Face folder, one safetensors file, llm.c's file, or PEFT's adapter folder", nullptr},
        {"--out", "PATH", "the file or folder to write (never one of the export's inputs)", nullptr},
        {"--max-shard-size", "SIZE", "hf: split the weights into files of at most SIZE (5GB, 500MB, bytes)", "5GB"},
        {"--merge-lora", "", "a LoRA checkpoint's model with its adapters merged in (formats hf, safetensors, llmc)", nullptr,
         T::none}}},
      {"tokenize",
       "text files to llm.c token shards through a tokenizer",
       {{"--tokenizer", "PATH", "a tokenizer.json (or its folder), a GGUF file or a .tiktoken file", nullptr},
        {"--out", "DIR", "the folder of the shards (train_000000.bin, ..., val_000000.bin)", nullptr},
        {"--val-fraction", "F", "the share of the input bytes, from the start, in the val shards, in [0, 1)", "0"},
        {"--threads", "N", "encoding threads, 1 to 1024", "every core"},
        {"--shard-tokens", "N", "the most tokens a shard holds", "100000000"},
        {"--chunk-bytes", "N", "the bytes a thread encodes at a time", "1048576"}},
       "INPUTS",
       "files, folders and globs (a .jsonl file: each line's \"text\" a document)"},
      {"config",
       "the configuration's keys: their types, defaults, ranges, rank agreement and meaning",
       {{"--list", "", "list every key the configuration file takes", nullptr, T::none},
        {"--format", "table|json|markdown", "the output (markdown: README.md's configuration table)", "table"}}},
  };
}

// The help line of a flag: its meaning, then its default.
std::string described(const FlagSpec& f) {
  std::string s = f.help;
  if (f.fallback) s += std::string(" (default: ") + f.fallback + ")";
  return s;
}

// CLI11's view of one command: every flag as a string (or strings), so that the command itself
// checks each value and names the flag ([Note: the command line]).
struct App {
  CLI::App app;
  std::map<std::string, std::vector<std::string>> values;  // storage CLI11 writes into
  std::vector<std::string> operands;

  explicit App(const CommandSpec& cmd) : app(cmd.summary, std::string("ztrain ") + cmd.name) {
    app.allow_extras();  // named by parse_command, as "unknown argument"
    app.set_help_flag("-h,--help", "this help");
    app.footer("The configuration's keys: ztrain config --list. Every command: ztrain --help.");
    for (const FlagSpec& f : cmd.flags) {
      if (f.takes == T::none) {
        app.add_flag(f.name)->description(described(f));
        continue;
      }
      // Every occurrence kept (the command takes the last of a single-valued one, as before), and
      // never more than one value an occurrence: what follows is the next flag or an operand.
      CLI::Option* o = app.add_option(f.name, values[f.name], described(f))->type_name(f.type);
      o->expected(f.takes == T::optional ? 0 : 1, 1)->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
    if (cmd.operands) app.add_option(cmd.operands, operands, cmd.operands_help)->type_name("PATH ...");
  }
};

}  // namespace

const std::vector<CommandSpec>& command_specs() {
  static const std::vector<CommandSpec> specs = make_specs();
  return specs;
}

const CommandSpec* find_command(std::string_view name) {
  for (const CommandSpec& c : command_specs())
    if (name == c.name) return &c;
  return nullptr;
}

ParsedCommand parse_command(const CommandSpec& cmd, int argc, char** argv, int first) {
  App a(cmd);
  std::vector<std::string> args;
  for (int i = argc - 1; i >= first; --i) args.emplace_back(argv[i]);  // CLI11 takes them reversed
  try {
    a.app.parse(args);
  } catch (const CLI::CallForHelp&) {
    throw HelpRequested{a.app.help()};
  } catch (const CLI::ArgumentMismatch& e) {
    // "--steps: 1 required N missing": a flag at the end without its value.
    const std::string what = e.what();
    throw UsageError(what.substr(0, what.find(':')) + " needs a value");
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  const std::vector<std::string> rest = a.app.remaining();
  if (!rest.empty()) {
    const std::string& arg = rest.front();  // shown whole up to a line's worth
    throw UsageError("unknown argument '" + (arg.size() <= 80 ? arg : arg.substr(0, 77) + "...") + "'");
  }

  ParsedCommand out;
  out.operands = a.operands;
  // [Note: the command line]: each occurrence, in order, with its value.
  std::map<const CLI::Option*, size_t> taken;
  for (const CLI::Option* o : a.app.parse_order()) {
    const std::string name = o->get_name();
    if (cmd.operands && name == cmd.operands) continue;
    const auto spec = std::find_if(cmd.flags.begin(), cmd.flags.end(), [&](const FlagSpec& f) { return name == f.name; });
    if (spec == cmd.flags.end()) continue;
    if (spec->takes == T::none) {
      out.flags.emplace_back(name, "true");
      continue;
    }
    // One result an occurrence, in order; an optional value left out is an empty one.
    const std::vector<std::string>& got = o->results();
    size_t& next = taken[o];
    const std::string value = next < got.size() ? got[next++] : std::string();
    out.flags.emplace_back(name, spec->takes == T::optional && value.empty() ? std::string(kNoValue) : value);
  }
  return out;
}

std::string command_help(const CommandSpec& cmd) { return App(cmd).app.help(); }

std::string global_help() {
  std::string s = "ztrain: train transformer language models across processes with ZeRO sharding\n\nusage: ztrain COMMAND "
                  "[FLAGS]   (ztrain COMMAND --help, or ztrain help COMMAND, lists its flags)\n\ncommands:\n";
  for (const CommandSpec& c : command_specs()) {
    std::string name = c.name;
    name.resize(10, ' ');
    s += "  " + name + c.summary + "\n";
  }
  s += "  help      ztrain help COMMAND: a command's flags\n\n  ztrain --version prints the version.\n";
  return s;
}

std::string usage_line(const CommandSpec* cmd) {
  if (!cmd) return global_help();
  return "usage: ztrain " + std::string(cmd->name) + " [FLAGS]" + (cmd->operands ? std::string(" ") + cmd->operands + "..." : "") +
         "   (ztrain " + cmd->name + " --help lists them)\n";
}

}  // namespace zt
