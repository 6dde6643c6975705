#include "runtime/cli/bench_peers.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "files/json_text.hpp"
#include "models/registry.hpp"
#include "runtime/train/trainer.hpp"

extern char** environ;

namespace zt {

namespace {

// Where bench/peers_step.py and bench/bench_plot.py are: $ZT_BENCH_SCRIPTS, else the source tree's
// bench/ this binary was built from.
std::string scripts_dir() {
  if (const char* d = std::getenv("ZT_BENCH_SCRIPTS")) return d;
  return ZT_BENCH_SCRIPTS;
}

std::string tail_of(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += (out.empty() ? "" : " / ") + all[i];
  return out;
}

// Runs `args` with its standard output and error in files; returns its exit status (-1: did not
// start). The child gets this process's environment without the MPI launcher's variables (a
// rank's OMPI_*, PMIX_*: DeepSpeed would take them for a job of its own) and with `extra`.
int run_child(const std::vector<std::string>& args, const std::vector<std::string>& extra, const std::string& out,
              const std::string& err) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string v = *e;
    if (v.starts_with("OMPI_") || v.starts_with("PMIX_") || v.starts_with("PMI_") || v.starts_with("OMP_NUM_THREADS="))
      continue;
    env_strings.push_back(v);
  }
  env_strings.insert(env_strings.end(), extra.begin(), extra.end());
  std::vector<char*> argv, envp;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ztrain_bench.XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("bench: cannot make a scratch folder: " + std::string(std::strerror(errno)));
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

std::string bench_python(const std::string& python) {
  if (!python.empty()) return python;
  if (const char* venv = std::getenv("ZTRAIN_PEERS")) return std::string(venv) + "/bin/python";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/ztrain-peers/bin/python";
}

void wait_for_ranks(Communicator& world) {
  if (world.size() == 1) return;
  const CommProgress was = world.progress();
  world.set_progress(CommProgress::poll);  // no thread polling MPI while nothing else runs
  WorkPtr w = world.barrier_async();
  while (!w->test()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  world.set_progress(was);
}

std::vector<BenchRow> run_peers(const Config& cfg, int world, int warmup, int steps, const std::string& python,
                                int threads) {
  const std::string py = bench_python(python);
  std::vector<BenchRow> rows;
  auto failed = [&](const std::string& label, const std::string& why) {
    BenchRow r;
    r.label = label;
    r.runner = "peer";
    r.error = why;
    rows.push_back(r);
  };
  if (access(py.c_str(), X_OK) != 0) {
    failed("peers", "no Python at " + py + " (scripts/install-peers.sh installs torch 2.x and DeepSpeed there; --python "
                    "names another)");
    return rows;
  }
  const ModelDims d = resolve_dims(cfg);
  const ModelSpec& spec = model_spec(cfg.model.arch);
  if (!spec.peer_args) {
    failed("peers", "bench/peers_step.py has no " + spec.family + " model");
    return rows;
  }
  std::vector<std::string> model_args = spec.peer_args(d);  // the architecture's own: --arch, ...
  for (const std::string& a : {std::string("--layers"), std::to_string(d.n_layer), std::string("--heads"),
                               std::to_string(d.n_head), std::string("--channels"), std::to_string(d.n_embd),
                               std::string("--vocab"), std::to_string(d.vocab_size), std::string("--max-seq"),
                               std::to_string(d.max_seq_len), std::string("--batch"), std::to_string(cfg.micro_batch),
                               std::string("--seq"), std::to_string(cfg.data.seq_len), std::string("--steps"),
                               std::to_string(steps), std::string("--warmup"), std::to_string(warmup)})
    model_args.push_back(a);
  ScratchDir scratch;
  struct Peer {
    std::string label, impl;
    int stage;
  };
  const std::vector<Peer> peers = {{"PyTorch DDP", "ddp", 0},        {"PyTorch FSDP2 (fully_shard)", "fsdp2", 3},
                                   {"DeepSpeed ZeRO-0", "deepspeed", 0}, {"DeepSpeed ZeRO-1", "deepspeed", 1},
                                   {"DeepSpeed ZeRO-2", "deepspeed", 2}, {"DeepSpeed ZeRO-3", "deepspeed", 3}};
  for (const Peer& p : peers) {
    std::vector<std::string> args = {py, "-m", "torch.distributed.run", "--nproc_per_node", std::to_string(world),
                                     "--standalone", scripts_dir() + "/peers_step.py", "--impl", p.impl, "--stage",
                                     std::to_string(p.stage)};
    args.insert(args.end(), model_args.begin(), model_args.end());
    const std::string out = scratch.path + "/" + p.impl + std::to_string(p.stage) + ".json";
    const std::string err = scratch.path + "/" + p.impl + std::to_string(p.stage) + ".err";
    const int status = run_child(args, {"DS_ACCELERATOR=cpu", "OMP_NUM_THREADS=" + std::to_string(threads)}, out, err);
    nlohmann::json j;
    std::ifstream in(out);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] == '{') j = parse_json(line).value;
    if (status != 0 || !j.is_object() || !j.contains("ms_per_step")) {
      failed(p.label, (status < 0 ? "did not start" : "exit status " + std::to_string(status)) + ": " + tail_of(err, 3));
      continue;
    }
    BenchRow r;
    r.label = p.label;
    r.runner = j.value("runner", std::string("peer"));
    r.steps = steps;
    r.ms_median = j["ms_per_step"].get<double>();
    r.ms_min = j.value("ms_min", r.ms_median);
    r.ms_max = j.value("ms_max", r.ms_median);
    r.tokens_per_s = j["tokens_per_s"].get<double>();
    if (j.contains("losses")) r.losses = j["losses"].get<std::vector<double>>();
    r.rss = j.value("rss_bytes", 0.0);
    rows.push_back(r);
  }
  return rows;
}

namespace {
// bench/bench_plot.py with `args` (the last the PNG), its output in `scratch`.
void run_plot(const std::vector<std::string>& args, const std::string& python, const ScratchDir& scratch) {
  const std::string out = scratch.path + "/plot.out";
  // Without the peers' environment, Debian's Python, for which scripts/install-deps.sh
  // installs matplotlib (never whichever python3 comes first on PATH).
  const std::string py = access(bench_python(python).c_str(), X_OK) == 0 ? bench_python(python) : "/usr/bin/python3";
  std::vector<std::string> argv{py, scripts_dir() + "/bench_plot.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  const int status = run_child(argv, {}, out, out);
  if (status != 0)
    throw std::runtime_error("--plot " + args.back() + ": bench/bench_plot.py (" + py + ") exited " +
                             std::to_string(status) + ": " + tail_of(out, 3));
}
}  // namespace

void plot_bench(const std::string& json, const std::string& png, const std::string& python) {
  ScratchDir scratch;
  const std::string in = scratch.path + "/bench.json";
  std::ofstream(in) << json;
  run_plot({in, png}, python, scratch);
}

void plot_metrics(const std::string& metrics, const std::string& png) {
  ScratchDir scratch;
  run_plot({"--metrics", metrics, png}, "", scratch);
}

}  // namespace zt
