#include "runtime/cli/cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <iostream>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/process_group.hpp"
#include "models/registry.hpp"
#include "runtime/agreed.hpp"
#include "runtime/api/trainer_handle.hpp"
#include "runtime/cli/bench.hpp"
#include "runtime/cli/bench_peers.hpp"
#include "runtime/cli/cli_flags.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/config.hpp"
#include "runtime/config_keys.hpp"
#include "runtime/file_io.hpp"
#include "runtime/plan/estimate.hpp"
#include "runtime/plan/simulate.hpp"
#include "runtime/checkpoint/export.hpp"
#include "runtime/cli/sample.hpp"
#include "runtime/cli/signals.hpp"
#include "runtime/cli/tokenize.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/tokenizer_files.hpp"
#include "runtime/checkpoint/weights.hpp"

namespace zt {

namespace {


// The train command's flags and config file, read into the run's settings; --plot's file in *plot.
Config train_config(int argc, char** argv, std::string* plot) {
  // The shortcut flags are spelled as the --set they stand for, applied in command-line order.
  const std::map<std::string, std::string> shortcut = {{"--init-from", "model.init_from"}, {"--train-data", "data.train"},
                                                       {"--steps", "train.steps"},        {"--seed", "train.seed"},
                                                       {"--metrics", "train.metrics"}, {"--trace", "train.trace"}};
  std::string config;
  std::vector<std::string> overrides;
  for (auto& [flag, value] : parse_command(*find_command("train"), argc, argv, 2).flags) {
    if (flag == "--resume") {
      // Alone, --resume means checkpoint.dir ([Note: the command line] in runtime/cli/commands.hpp).
      overrides.push_back("train.resume=" + (value == kNoValue ? std::string("true") : nlohmann::json(value).dump()));
    } else if (flag == "--config") {
      config = value;
    } else if (flag == "--set") {
      overrides.push_back(value);
    } else if (flag == "--plot") {
      *plot = value;
    } else {
      // Checked here, so that a bad number is a usage error naming the flag, not the key.
      const std::string v = flag == "--steps"  ? std::to_string(int_flag(flag, value, 1, INT_MAX))
                            : flag == "--seed" ? std::to_string(seed_flag(flag, value))
                                               : nlohmann::json(value).dump();
      overrides.push_back(shortcut.at(flag) + "=" + v);
    }
  }
  if (config.empty()) throw UsageError("train needs --config FILE");
  Config cfg = load_config(config, overrides);
  if (!plot->empty() && cfg.train.metrics.empty())
    throw UsageError("train --plot draws the curves from the metrics file: give train.metrics too (--metrics FILE)");
  if (!plot->empty() && resolved_path(*plot) == resolved_path(cfg.train.metrics))
    throw UsageError("train --plot '" + *plot + "' is the metrics file it draws from; name another file");
  return cfg;
}

int cmd_train(int argc, char** argv, ProcessGroup& pg) {
  // Every rank reads its own command line and file: a rank that cannot ends the others with it,
  // and ranks that all fail alike end together ([Note: failing together]).
  Config cfg;
  std::string plot;
  agreed(pg.world(), "reading the command line and the configuration", [&] {
    cfg = train_config(argc, argv, &plot);
    if (!plot.empty() && pg.world().rank() == 0) ReplacedFile probe(plot, "train --plot");  // writable: now, not after the run
  });
  // The embedding API's trainer, driven as any host drives it (runtime/api/trainer_handle.hpp); its
  // log goes to standard output from rank 0. An error comes back as its message, with the mark of
  // an error every rank raised together still set ([Note: failing the job]).
  auto ok = [](zt_status s) {
    if (s != ZT_OK) throw std::runtime_error(zt_last_error());
  };
  zt_trainer* t = nullptr;
  ok(api::create_trainer(cfg, pg.world(), &t));
  const std::unique_ptr<zt_trainer, zt_status (*)(zt_trainer*)> owned(t, zt_trainer_destroy);
  ok(zt_trainer_run(t));
  if (!plot.empty() && pg.world().rank() == 0) {
    plot_metrics(cfg.train.metrics, plot);
    std::cout << "plotted " << cfg.train.metrics << " to " << plot << std::endl;
  }
  return 0;
}

// Text from a model: GPT-2 or the Llama family from an llm.c file, a Hugging Face folder, a GGUF
// file or a ztrain checkpoint; through a tokenizer (--tokenizer, or the one a GGUF file or a Hugging
// Face folder carries, or the one a checkpoint's run recorded), or as bytes for a byte-level model. --chat renders the prompt as a user turn
// with the template and stops at its end-of-turn token. Tokens are printed as they are chosen.
int cmd_sample(int argc, char** argv) {
  std::string checkpoint, prompt, tokenizer, chat_template = "chatml", system;
  bool chat = false;
  SampleOptions opt;
  for (auto& [flag, value] : parse_command(*find_command("sample"), argc, argv, 2).flags) {
    if (flag == "--checkpoint") checkpoint = value;
    else if (flag == "--prompt") prompt = value;
    else if (flag == "--tokens") opt.tokens = static_cast<int>(int_flag(flag, value, 0, INT_MAX));
    else if (flag == "--top-k") opt.top_k = static_cast<int>(int_flag(flag, value, 1, INT_MAX));
    else if (flag == "--top-p") opt.top_p = static_cast<float>(number_flag(flag, value, 0.0));
    else if (flag == "--seed") opt.seed = seed_flag(flag, value);
    else if (flag == "--tokenizer") tokenizer = value;
    else if (flag == "--chat-template") chat_template = value;
    else if (flag == "--system") system = value;
    else if (flag == "--chat") chat = value == "true" || value == "1" ? true : value == "false" || value == "0" ? false
                                     : throw UsageError("--chat expects true or false, got '" + value + "'");
    else opt.temperature = static_cast<float>(number_flag(flag, value, 0.0));
  }
  if (checkpoint.empty()) throw UsageError("sample needs --checkpoint PATH");
  if (!(opt.top_p > 0.0f && opt.top_p <= 1.0f)) throw UsageError("--top-p must be in (0, 1], got " + std::to_string(opt.top_p));
  const StoredModel stored = stored_model(checkpoint);
  const std::unique_ptr<Model> owned = make_model(stored.arch, stored.dims);
  Model& model = *owned;
  std::optional<Tokenizer> tok;
  if (tokenizer.empty()) tokenizer = stored.tokenizer;  // the file's own, or the one its run recorded
  if (!tokenizer.empty()) tok.emplace(load_tokenizer(tokenizer));
  const int vocab = model.dims().vocab_size;
  if (!tok && vocab != 256)
    throw std::runtime_error("sample: '" + checkpoint + "' has a vocabulary of " + std::to_string(vocab) +
                             " tokens and carries no tokenizer: give it with --tokenizer PATH (a tokenizer.json, a GGUF file, "
                             "gpt2.tiktoken for GPT-2)");
  if (tok && tok->vocab_size() > vocab)
    throw std::runtime_error("sample: the tokenizer " + tok->source() + " has " + std::to_string(tok->vocab_size()) +
                             " tokens, more than the model's vocabulary of " + std::to_string(vocab));
  if (chat && !tok) throw UsageError("--chat needs a tokenizer with the chat template's special tokens");
  std::vector<Tensor> buffers;
  for (int u = 0; u < model.num_units(); ++u) {
    buffers.push_back(Tensor::empty({model.layout()[u].numel}, DType::f32, MemCategory::parameters));
    model.bind_unit(u, buffers.back(), Tensor());
  }
  load_weights(checkpoint, model);

  std::vector<int32_t> ids;
  std::function<void(int32_t)> emit;
  if (!tok) {  // bytes, not chars: a signed char would give negative ids
    if (prompt.empty()) prompt = "\n";
    for (char c : prompt) ids.push_back(static_cast<unsigned char>(c));
    std::cout << prompt << std::flush;
    emit = [](int32_t t) { std::cout << static_cast<char>(t) << std::flush; };
  } else {
    if (tok->find("<|endoftext|>")) opt.stop.push_back(*tok->find("<|endoftext|>"));
    if (chat) {
      const ChatTemplate tmpl(chat_template);
      const auto end_of_turn = tok->find(tmpl.end_of_turn());
      if (!end_of_turn) throw std::runtime_error("sample: the tokenizer " + tok->source() + " has no " + tmpl.end_of_turn() +
                                                 " for the chat template '" + chat_template + "'");
      opt.stop.push_back(*end_of_turn);
      std::vector<ChatMessage> messages;
      if (!system.empty()) messages.push_back({"system", system});
      messages.push_back({"user", prompt});
      TokenEncoder enc(*tok);
      ChatTokens rendered;
      encode_chat(tmpl.render(messages, true), *tok, enc, rendered);
      ids = std::move(rendered.ids);
    } else {
      ids = tok->encode(prompt);
      if (ids.empty()) ids.push_back(opt.stop.empty() ? 0 : opt.stop.front());  // start a text from nothing
      std::cout << prompt << std::flush;
    }
    emit = [&](int32_t t) {
      if (chat && t == opt.stop.back()) return;  // the end of the answer, not a part of it
      const std::string& bytes = tok->token(t);
      std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) << std::flush;
    };
  }
  generate(model, ids, opt, emit);
  std::cout << std::endl;
  return 0;
}

// Per-rank memory of a step for stages 0-3 (runtime/plan/estimate.hpp). One process, no MPI and no
// data: it only reads the config (and an init_from checkpoint's header).
int cmd_export(int argc, char** argv) {
  std::string checkpoint, format, out;
  uint64_t max_shard = 5'000'000'000;
  bool merge_lora = false;
  for (auto& [flag, value] : parse_command(*find_command("export"), argc, argv, 2).flags) {
    if (flag == "--merge-lora") merge_lora = true;
    else if (flag == "--checkpoint") checkpoint = value;
    else if (flag == "--format") format = value;
    else if (flag == "--max-shard-size") max_shard = byte_size_flag(flag, value);
    else out = value;
  }
  if (checkpoint.empty() || out.empty()) throw UsageError("export needs --checkpoint DIR and --out PATH");
  if (format != "hf" && format != "safetensors" && format != "llmc" && format != "peft")
    throw UsageError("export: --format must be hf, safetensors, llmc or peft, got '" + format + "'");
  if (merge_lora && format == "peft")
    throw UsageError("export: --merge-lora writes the merged model (--format hf, safetensors or llmc); peft writes the adapters");
  export_checkpoint(checkpoint, format, out, max_shard, merge_lora);
  std::cout << "exported " << checkpoint << " to " << out << " (" << format << ")" << std::endl;
  return 0;
}

// Text into llm.c token shards ([Note: tokenizing a corpus] in runtime/cli/tokenize.hpp).
int cmd_tokenize(int argc, char** argv) {
  std::string tokenizer;
  TokenizeOptions opt;
  ParsedCommand parsed = parse_command(*find_command("tokenize"), argc, argv, 2);
  opt.inputs = std::move(parsed.operands);
  for (auto& [flag, value] : parsed.flags) {
    if (flag == "--tokenizer") tokenizer = value;
    else if (flag == "--out") opt.out = value;
    else if (flag == "--val-fraction") opt.val_fraction = number_flag(flag, value, 0.0);
    else if (flag == "--threads") opt.threads = static_cast<int>(int_flag(flag, value, 1, 1024));
    else if (flag == "--shard-tokens") opt.shard_tokens = int_flag(flag, value, 1, INT32_MAX);
    else opt.chunk_bytes = int_flag(flag, value, 1, int64_t(1) << 40);
  }
  if (tokenizer.empty() || opt.out.empty() || opt.inputs.empty())
    throw UsageError("tokenize needs --tokenizer PATH, --out DIR and at least one input");
  if (opt.val_fraction >= 1.0) throw UsageError("--val-fraction must be below 1, got " + std::to_string(opt.val_fraction));
  const Tokenizer tok = load_tokenizer(tokenizer);
  // A bar on a terminal, redrawn in place; nothing in a log but the summary.
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  auto bar = [&](int64_t done, int64_t total, double s) {
    if (!tty) return;
    const double frac = total > 0 ? double(done) / double(total) : 1.0;
    const int width = 30, filled = static_cast<int>(frac * width);
    char line[160];
    std::snprintf(line, sizeof line, "\rtokenize [%s%s] %5.1f%%  %.1f of %.1f MB  %.2f MB/s", std::string(size_t(filled), '#').c_str(),
                  std::string(size_t(width - filled), ' ').c_str(), 100 * frac, double(done) / 1e6, double(total) / 1e6,
                  s > 0 ? double(done) / 1e6 / s : 0.0);
    std::cerr << line << std::flush;
  };
  const TokenizeReport r = tokenize_corpus(tok, opt, bar);
  if (tty) std::cerr << "\n";
  std::printf("tokenized %lld documents, %.2f MB, into %lld train and %lld val tokens in %.2f s (%.2f MB/s, %d threads); "
              "llm.c shards version %d (%s tokens) in %s:\n",
              static_cast<long long>(r.documents), double(r.bytes) / 1e6, static_cast<long long>(r.train_tokens),
              static_cast<long long>(r.val_tokens), r.seconds, r.seconds > 0 ? double(r.bytes) / 1e6 / r.seconds : 0.0,
              r.threads, r.format_version, r.format_version == 1 ? "uint16" : "uint32", opt.out.c_str());
  for (const std::string& f : r.files) std::printf("  %s\n", f.c_str());
  return 0;
}

int cmd_estimate(int argc, char** argv) {
  std::string config, format = "table";
  std::vector<std::string> overrides;
  long world = 1, per_host = 0;
  for (auto& [flag, value] : parse_command(*find_command("estimate"), argc, argv, 2).flags) {
    if (flag == "--config") config = value;
    else if (flag == "--set") overrides.push_back(value);
    else if (flag == "--world-size") world = int_flag(flag, value, 1, 1 << 24);
    else if (flag == "--ranks-per-host") per_host = int_flag(flag, value, 1, 1 << 24);
    else format = value;
  }
  if (config.empty()) throw UsageError("estimate needs --config FILE");
  if (format != "table" && format != "json") throw UsageError("--format must be table or json, got '" + format + "'");
  const Config cfg = load_config(config, overrides);
  const MemoryEstimate e = estimate_memory(cfg, static_cast<int>(world), static_cast<int>(per_host));
  std::cout << (format == "json" ? estimate_json(e) : format_estimate(cfg, e));
  return 0;
}

// One step's time, exposed communication, memory and MFU on a described cluster
// (runtime/plan/simulate.hpp). One process, like estimate.
int cmd_simulate(int argc, char** argv) {
  std::string config, cluster_file, trace, format = "table";
  std::vector<std::string> overrides;
  long world = 1;
  for (auto& [flag, value] : parse_command(*find_command("simulate"), argc, argv, 2).flags) {
    if (flag == "--config") config = value;
    else if (flag == "--cluster") cluster_file = value;
    else if (flag == "--set") overrides.push_back(value);
    else if (flag == "--world-size") world = int_flag(flag, value, 1, 1 << 24);
    else if (flag == "--trace") trace = value;
    else format = value;
  }
  if (config.empty()) throw UsageError("simulate needs --config FILE");
  if (cluster_file.empty()) throw UsageError("simulate needs --cluster FILE (bench/clusters/ has examples)");
  if (format != "table" && format != "json") throw UsageError("--format must be table or json, got '" + format + "'");
  const Config cfg = load_config(config, overrides);
  const Cluster cluster = load_cluster(cluster_file);
  const Simulation s = simulate_step(cfg, static_cast<int>(world), cluster);
  if (!trace.empty()) write_simulated_trace(s, trace);
  std::cout << (format == "json" ? simulation_json(s) : format_simulation(cfg, cluster, s));
  return 0;
}

// The configuration's keys, from their table ([Note: one declaration per key] in runtime/config_keys.hpp).
int cmd_config(int argc, char** argv) {
  bool list = false;
  std::string format = "table";
  for (auto& [flag, value] : parse_command(*find_command("config"), argc, argv, 2).flags) {
    if (flag == "--list") list = true;
    else format = value;
  }
  if (!list) throw UsageError("config needs --list");
  if (format != "table" && format != "json" && format != "markdown")
    throw UsageError("--format must be table, json or markdown, got '" + format + "'");
  std::cout << config_reference(format);
  return 0;
}

}  // namespace

int cli_main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "--help" || cmd == "-h" || (cmd == "help" && argc == 2)) {
    std::cout << global_help();
    return 0;
  }
  if (cmd == "--version") {
    std::cout << "ztrain 0.1.0\n";
    return 0;
  }
  if (cmd == "help") {  // ztrain help CMD
    const CommandSpec* c = find_command(argv[2]);
    if (!c) {
      write_line(STDERR_FILENO, "ztrain: unknown command '" + std::string(argv[2]) + "'\n" + global_help());
      return 2;
    }
    std::cout << command_help(*c);
    return 0;
  }
  // A command's --help, before MPI starts (under mpirun every rank would answer alike).
  if (const CommandSpec* c = find_command(cmd)) try {
      (void)parse_command(*c, argc, argv, 2);
    } catch (const HelpRequested& h) {
      std::cout << h.text;
      return 0;
    } catch (const std::exception&) {
      // a usage error: the command says it below, as it always has
    }
  std::unique_ptr<SignalGuard> signals;
  std::unique_ptr<ProcessGroup> pg;
  try {
    // [Note: ending on a signal]: before MPI and OpenMP start threads, which inherit the mask.
    signals = std::make_unique<SignalGuard>();
    pg = ProcessGroup::start(&argc, &argv);
  } catch (const std::exception& e) {
    write_line(STDERR_FILENO, "ztrain: error: " + std::string(e.what()));
    return 1;
  }
  // [Note: failing the job] in comm/process_group.hpp: with several ranks, any error ends them all.
  const bool several = pg->size() > 1;
  try {
    if (cmd == "train") return cmd_train(argc, argv, *pg);
    if (cmd == "bench") return cmd_bench(argc, argv, *pg);
    if (cmd == "sample") return cmd_sample(argc, argv);
    if (cmd == "estimate") return cmd_estimate(argc, argv);
    if (cmd == "simulate") return cmd_simulate(argc, argv);
    if (cmd == "export") return cmd_export(argc, argv);
    if (cmd == "tokenize") return cmd_tokenize(argc, argv);
    if (cmd == "config") return cmd_config(argc, argv);
    throw UsageError(cmd.empty() ? "no command given" : "unknown command '" + cmd + "'");
  } catch (const std::exception& e) {
    const bool usage = dynamic_cast<const UsageError*>(&e) != nullptr;
    const int status = usage ? 2 : 1;
    // [Note: failing the job]: an error of this rank alone ends every rank.
    const Together together = several ? failing_together() : Together::own;
    if (together == Together::no) pg->fail(e.what(), status);
    if (together == Together::own) {
      std::string text = usage_line(find_command(cmd));
      text.pop_back();  // write_line ends the line
      const std::string said = usage ? "ztrain: " + std::string(e.what()) + "\n" + text
                                     : (several ? "" : "ztrain: ") + std::string("error: ") + e.what();
      write_line(STDERR_FILENO, pg->prefix() + said);
    }
    // [Note: failing together]: every rank is ending here, and pg's destructor meets them at the
    // end. The first rank to exit non-zero has mpirun end the others with SIGTERM, which, the error
    // said, must not add "stopped by SIGTERM": the guard goes (nothing is left for it to clean).
    signals.reset();
    return status;
  }
}

}  // namespace zt
