#include "runtime/train/outputs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runtime/agreed.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/checkpoint_root.hpp"
#include "runtime/data/data.hpp"
#include "runtime/file_io.hpp"
#include "runtime/train/monitor.hpp"

namespace zt {

namespace {

namespace fs = std::filesystem;

struct Output {
  const char* key;
  const std::string& path;
  bool replaced;  // written whole through a temporary file, else line by line in place
};

// Opens `path` for writing as the run will, without truncating what is there now (a file it
// creates for the check is removed again).
void check_writable_in_place(const std::string& path, const char* key) {
  create_parent(path, key);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    { CheckpointFile f(path, O_WRONLY | O_CREAT | O_EXCL, key); }
    ::unlink(path.c_str());
  } else if (S_ISDIR(st.st_mode)) {
    throw std::runtime_error(std::string(key) + ": '" + path + "' is a folder; name a file");
  } else if (!S_ISFIFO(st.st_mode)) {  // opening a FIFO waits for its reader: the run's business
    CheckpointFile f(path, O_WRONLY, key);
  }
}

// What the run reads: an output written over one would destroy it (a metrics file opened over the
// starting model, or a LoRA run's merged model saved over the frozen model its checkpoints'
// adapters need). The model files by role (a folder's files count as it), and the data files,
// resolved once (a corpus may hold many); lists that cannot be expanded are the loaders' to report.
struct RunInputs {
  std::vector<std::pair<const char*, std::string>> models;
  std::set<fs::path> data;
};
RunInputs run_inputs(const Config& cfg) {
  RunInputs in;
  if (cfg.model.init_from) in.models.emplace_back("model.init_from", *cfg.model.init_from);
  in.models.emplace_back("lora.init_from", cfg.lora.init_from);
  in.models.emplace_back("data.tokenizer", cfg.data.tokenizer);
  if (cfg.data.format == "bytes" || cfg.data.format == "chat")
    for (const std::string& list : {cfg.data.train, cfg.data.val}) {
      if (list.empty()) continue;
      try {
        for (const std::string& f : list_files(list)) in.data.insert(resolved_path(f));
      } catch (const std::exception&) {
      }
    }
  return in;
}

}  // namespace

void check_outputs(const Config& cfg, Communicator& comm) {
  agreed(comm, "checking the run's output files", [&] {
    if (comm.rank() != 0) return;
    const Output outputs[] = {{"train.save_model", cfg.train.save_model, true},
                              {"train.trace", cfg.train.trace, true},
                              {"train.metrics", cfg.train.metrics, false}};
    std::unique_ptr<SavedCheckpoint> resumed;  // read when an output is to be checked against it
    const auto inputs = run_inputs(cfg);
    // What ztrain manages, which no output may lie in: checkpoint.dir's names, the checkpoint resumed from.
    auto refuse_managed = [&](const std::string& said, const std::string& path) {
      if (!cfg.checkpoint.dir.empty() && in_checkpoint_folder(cfg.checkpoint.dir, path))
        throw std::runtime_error(said + " lies inside the checkpoint folder '" + cfg.checkpoint.dir +
                                 "', whose `latest` and step_<k> folders ztrain manages; write it elsewhere");
      if (!cfg.train.resume.empty() && !resumed) resumed = std::make_unique<SavedCheckpoint>(cfg.train.resume);
      if (resumed && resumed->owns(path))
        throw std::runtime_error(said + " lies inside the checkpoint this run resumes from ('" + resumed->folder() +
                                 "'); write it elsewhere");
    };
    for (size_t i = 0; i < std::size(outputs); ++i) {
      const Output& o = outputs[i];
      if (o.path.empty()) continue;
      const std::string said = std::string(o.key) + ": '" + o.path + "'";
      for (size_t j = 0; j < i; ++j)
        if (!outputs[j].path.empty() && resolved_path(o.path) == resolved_path(outputs[j].path))
          throw std::runtime_error(said + " is also " + outputs[j].key + "; give each output its own file");
      for (const auto& [role, input] : inputs.models) {
        std::error_code ec;
        if (!input.empty() && (lies_within(input, o.path) || (fs::is_directory(input, ec) && lies_within(o.path, input))))
          throw std::runtime_error(said + " is or lies in " + role + " ('" + input +
                                   "'), which the run reads; write it elsewhere");
      }
      if (inputs.data.count(resolved_path(o.path)))
        throw std::runtime_error(said + " is a data file of the run, which it reads; write it elsewhere");
      refuse_managed(said, o.path);
      if (o.replaced) {
        ReplacedFile probe(o.path, o.key);  // created, and removed again uncommitted
      } else {
        check_writable_in_place(o.path, o.key);
      }
    }
    // The monitors' folders hold files of their own names (runtime/train/monitor.hpp): checked as
    // a folder the run writes into, which both sections may share.
    for (const auto& [key, m] : {std::pair{"tensorboard", &cfg.tensorboard}, std::pair{"csv_monitor", &cfg.csv_monitor}}) {
      if (!m->enabled) continue;
      const std::string folder = monitor_folder(*m);
      const std::string said = std::string(key) + ": the folder '" + folder + "' (output_path/job_name)";
      // Its files have names of their own (events.out.tfevents.*, <tag>.csv), so the folder may
      // hold other things; it may not lie in what the run reads or in what ztrain manages.
      for (const auto& [role, input] : inputs.models)
        if (!input.empty() && lies_within(folder, input))
          throw std::runtime_error(said + " is or lies in " + role + " ('" + input + "'), which the run reads; write it elsewhere");
      refuse_managed(said, folder);
      std::error_code ec;
      if (fs::exists(folder, ec) && !fs::is_directory(folder, ec))
        throw std::runtime_error(said + " is a file; name a folder");
      ReplacedFile probe((fs::path(folder) / ".ztrain-probe").string(), key);  // the folder made; the file removed again
    }
  });
}

}  // namespace zt
