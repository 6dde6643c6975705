#include "runtime/checkpoint/checkpoint_root.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <utility>

#include "runtime/agreed.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/file_io.hpp"

namespace zt {

namespace fs = std::filesystem;

namespace {

// k of a folder named step_<k> (digits only: step_5.tmp and step_5.new are not checkpoints), or -1.
int step_of(const std::string& name) {
  if (name.rfind("step_", 0) != 0 || name.size() == 5 || name.size() > 14) return -1;
  if (!std::all_of(name.begin() + 5, name.end(), [](unsigned char c) { return std::isdigit(c); })) return -1;
  return static_cast<int>(std::stol(name.substr(5)));
}

// The folder's checkpoints, lowest step first.
std::vector<std::pair<int, fs::path>> checkpoints_in(const std::string& root) {
  std::vector<std::pair<int, fs::path>> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (const int k = step_of(e.path().filename().string()); k >= 0 && e.is_directory(ec)) steps.emplace_back(k, e.path());
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string read_latest(const std::string& root) {
  std::ifstream in(fs::path(root) / "latest");
  std::string name;
  std::getline(in, name);
  return name;
}

// A save of a step saved before publishes as step_<k>.new, and `latest` names that until the old
// folder is replaced ([Note: checkpoint layout] in runtime/checkpoint/checkpoint.hpp): finishes what a kill
// interrupted there, so the folder holds plain step_<k> folders again.
void finish_publish(const std::string& root) {
  const std::string name = read_latest(root);
  if (name.size() <= 4 || !name.ends_with(".new")) return;
  const std::string base = name.substr(0, name.size() - 4);
  const fs::path fresh = fs::path(root) / name, final_dir = fs::path(root) / base;
  std::error_code ec;
  if (fs::exists(fresh, ec)) {
    fs::remove_all(final_dir, ec);
    rename_synced(fresh.string(), final_dir.string());
  }
  write_atomically((fs::path(root) / "latest").string(), base + "\n");
}

// What killed saves left: step_<k>.tmp folders and the temporary names of `latest`.
void remove_leftovers(const std::string& root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if ((n.rfind("step_", 0) == 0 && n.ends_with(".tmp")) || n.rfind("latest.tmp", 0) == 0) fs::remove_all(e.path(), ec);
  }
}

std::string names(const std::vector<std::pair<int, fs::path>>& steps) {
  std::string out;
  for (size_t i = 0; i < steps.size() && i < 4; ++i) out += (i ? ", " : "") + steps[i].second.filename().string();
  if (steps.size() > 4) out += ", ... " + steps.back().second.filename().string();
  return out;
}

}  // namespace

CheckpointRoot::CheckpointRoot(const Config& cfg, Communicator& comm)
    : root_(cfg.checkpoint.dir), keep_last_(cfg.checkpoint.keep_last), lead_(comm.rank() == 0) {
  agreed<CheckpointError>(comm, "checkpoint: preparing '" + root_ + "'", [&] {
    if (comm.rank() != 0) return;
    std::error_code ec;
    fs::create_directories(root_, ec);
    if (ec) throw CheckpointError("checkpoint.dir: cannot create '" + root_ + "': " + ec.message());
    // [Note: one history per folder]
    const bool resuming = !cfg.train.resume.empty();
    const int resumed = resuming ? SavedCheckpoint(cfg.train.resume).position().steps_done : 0;
    auto others = checkpoints_in(root_);
    if (resuming)
      others.erase(others.begin(), std::find_if(others.begin(), others.end(), [&](const auto& s) { return s.first > resumed; }));
    if (!others.empty() && !resuming && !cfg.checkpoint.overwrite) {
      const std::string latest = read_latest(root_);
      throw CheckpointError("checkpoint.dir: '" + root_ + "' already holds checkpoints (" + names(others) +
                            (latest.empty() ? "" : "; latest names " + latest) +
                            ") and this run does not resume: continue them with --resume, or set "
                            "checkpoint.overwrite true to start a new run there (its first complete save removes "
                            "them), or choose another checkpoint.dir");
    }
    if (!others.empty() && cfg.checkpoint.overwrite) {
      for (const auto& s : others) superseded_.push_back(s.second.string());
      note_ = "checkpoint.overwrite: this run's first save replaces " + names(others) + " in " + root_;
    } else if (!others.empty()) {
      note_ = "warning: " + root_ + " holds checkpoints past step " + std::to_string(resumed) + " (" + names(others) +
              "), from before this run; they stay until this run saves those steps again (checkpoint.overwrite "
              "true removes them with its first save)";
    }
    finish_publish(root_);
    remove_leftovers(root_);
  });
  // Every rank writes its file of each checkpoint here.
  agreed<CheckpointError>(comm, "checkpoint: checking '" + root_ + "'", [&] {
    const std::string probe =
        (fs::path(root_) / (".write-check-rank" + std::to_string(comm.rank()) + "-" + std::to_string(::getpid()))).string();
    { CheckpointFile f(probe, O_WRONLY | O_CREAT | O_TRUNC, "checkpoint.dir"); }
    ::unlink(probe.c_str());
  });
}

bool in_checkpoint_folder(const std::string& root, const std::string& path) {
  const fs::path rel = resolved_path(path).lexically_relative(resolved_path(root));
  if (rel.empty() || *rel.begin() == "..") return false;
  const std::string first = rel.begin()->string();
  return first == "latest" || first.rfind("step_", 0) == 0;
}

void CheckpointRoot::confirm() {
  const int step = std::exchange(unconfirmed_, -1);
  if (step < 0 || !lead_) return;
  std::error_code ec;
  const std::string current = (fs::path(root_) / ("step_" + std::to_string(step))).string();
  for (const std::string& old : superseded_)
    if (old != current) fs::remove_all(old, ec);
  superseded_.clear();
  if (keep_last_ <= 0) return;
  // Never the one `latest` names: of the others the lowest numbers go.
  auto steps = checkpoints_in(root_);
  std::erase_if(steps, [&](const auto& s) { return s.first == step; });
  for (size_t i = 0; i + static_cast<size_t>(keep_last_) < steps.size() + 1; ++i) fs::remove_all(steps[i].second, ec);
}

}  // namespace zt
