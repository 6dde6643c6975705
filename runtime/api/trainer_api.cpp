// The embedding API (include/ztrain/ztrain.h) over the Trainer.
//
// [Note: the C boundary] Every zt_* function catches everything: an exception becomes a status and
// the calling thread's message (zt_last_error), never an unwinding through C or Fortran frames.
// Handles are checked against the set of live ones before use, so a NULL, destroyed or made-up
// pointer is ZT_ERR_ARGUMENT rather than a read of freed memory. An error that leaves the trainer's
// state unknown (a step, a load or a collective that failed part-way) marks the trainer failed:
// from then on only zt_trainer_destroy is answered. The errors a call checks before it changes
// anything (a batch's shape and tokens, agreed over the ranks; a checkpoint or model file that
// cannot be written) leave it usable. A trainer takes one call at a time: the live check and the
// claim of the trainer (`busy`) are one step under the live set's lock, so a second thread's call
// while one runs (or a call from inside a log callback) is ZT_ERR_ARGUMENT and touches nothing,
// and zt_trainer_destroy cannot free a trainer another call is in.
#include <unistd.h>

#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>
#include <vector>

#include "comm/process_group.hpp"
#include "models/registry.hpp"
#include "runtime/agreed.hpp"
#include "runtime/api/trainer_handle.hpp"
#include "runtime/data/data.hpp"
#include "runtime/file_io.hpp"
#include "runtime/train/metrics.hpp"
#include "runtime/train/trainer.hpp"
#include "tensor/allocator.hpp"

struct zt_trainer {
  std::unique_ptr<zt::Communicator> own_comm;  // before the trainer, which uses it to the end
  std::unique_ptr<zt::Trainer> trainer;
  // The accumulation's micro-batches so far: a step computes over them all once the last arrives
  // ([Note: masked loss] in runtime/train/trainer.cpp counts every micro-batch first).
  std::vector<int32_t> tokens, targets;
  std::string failed;         // why the trainer failed; empty while it is usable
  bool busy = false;          // a call is in it ([Note: the C boundary]); under g_live_mutex
  std::string metrics = "{}";  // the last step's metrics line
  // Where rank 0's lines go (zt_trainer_set_log); empty: nowhere.
  std::function<void(const std::string&)> log = [](const std::string& line) { zt::write_line(STDOUT_FILENO, line); };
};

namespace zt::api {
namespace {

thread_local std::string g_error;

std::mutex g_live_mutex;
std::unordered_set<const zt_trainer*> g_live;

zt_status fail_with(zt_status status, const std::string& message) {
  g_error = message;
  return status;
}

const char* const kInUse = "the trainer is in use by another thread (or by the call whose log callback made this one): "
                           "a trainer takes one call at a time";

// The calling thread's hold on a live trainer for one call ([Note: the C boundary]): status() is
// ZT_OK when held, else the error (already in g_error), and nothing of the trainer was touched.
class Claim {
 public:
  Claim(zt_trainer* t, const char* call) : t_(t) {
    std::lock_guard lock(g_live_mutex);
    if (!t || g_live.count(t) == 0)
      status_ = fail_with(ZT_ERR_ARGUMENT, std::string(call) + ": " + (t ? "not a live trainer (destroyed, or never made by "
                                                                           "zt_trainer_create)" : "the trainer is NULL"));
    else if (t->busy)
      status_ = fail_with(ZT_ERR_ARGUMENT, std::string(call) + ": " + kInUse);
    else
      t->busy = true;
  }
  ~Claim() {
    if (status_ != ZT_OK) return;
    std::lock_guard lock(g_live_mutex);
    t_->busy = false;
  }
  Claim(const Claim&) = delete;
  Claim& operator=(const Claim&) = delete;
  zt_status status() const { return status_; }

 private:
  zt_trainer* t_;
  zt_status status_ = ZT_OK;
};

// The status an exception stands for ([Note: the C boundary]); its message into g_error.
zt_status status_of_current_exception(const std::string& call) {
  try {
    throw;
  } catch (const std::invalid_argument& e) {
    return fail_with(ZT_ERR_ARGUMENT, call + ": " + e.what());
  } catch (const ConfigError& e) {
    return fail_with(ZT_ERR_CONFIG, e.what());
  } catch (const DataError& e) {
    return fail_with(ZT_ERR_DATA, e.what());
  } catch (const CheckpointError& e) {
    return fail_with(ZT_ERR_CHECKPOINT, e.what());
  } catch (const CommError& e) {
    return fail_with(ZT_ERR_COMM, e.what());
  } catch (const NonfiniteStep& e) {
    return fail_with(ZT_ERR_NONFINITE, e.what());
  } catch (const Unsupported& e) {
    return fail_with(ZT_ERR_UNSUPPORTED, call + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return fail_with(ZT_ERR_MEMORY, call + ": out of memory");
  } catch (const std::exception& e) {  // its message says what failed already
    return fail_with(ZT_ERR_RUNTIME, e.what());
  } catch (...) {
    return fail_with(ZT_ERR_RUNTIME, call + ": an unknown error");
  }
}

// A call on a live, usable trainer: `body` runs; the statuses in `survivable` leave the trainer
// usable, any other failure marks it failed.
template <class F>
zt_status with_trainer(zt_trainer* t, const char* call, std::initializer_list<zt_status> survivable, F&& body) {
  g_error.clear();
  const Claim claim(t, call);
  if (claim.status() != ZT_OK) return claim.status();
  if (!t->failed.empty())
    return fail_with(ZT_ERR_FAILED, std::string(call) + ": the trainer failed earlier (" + t->failed +
                                        "); zt_trainer_destroy is all it takes now");
  forget_failing_together();
  try {
    body(*t->trainer);
    return ZT_OK;
  } catch (...) {
    const zt_status s = status_of_current_exception(call);
    if (std::find(survivable.begin(), survivable.end(), s) == survivable.end()) t->failed = g_error;
    return s;
  }
}

void log_line(zt_trainer& t, const std::string& line) {
  if (t.trainer->comm().rank() == 0 && t.log) t.log(line);
}

// One micro-batch's shape against the config's, and its tokens against the vocabulary, agreed over
// the ranks: a bad batch on any rank is ZT_ERR_ARGUMENT on every rank, before anything changes.
void check_micro_batch(Trainer& tr, const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T) {
  agreed<std::invalid_argument>(tr.host_comm(), "checking the batches", [&] {
    const Config& c = tr.config();
    if (B != c.micro_batch || T != c.data.seq_len)
      throw std::invalid_argument("the batch is " + std::to_string(B) + " x " + std::to_string(T) +
                                  " tokens; the config's is " + std::to_string(c.micro_batch) + " x " +
                                  std::to_string(c.data.seq_len) + " (train_micro_batch_size_per_gpu x data.seq_len)");
    tr.check_batch(tokens, targets);
  });
}

void fill(zt_step_result* r, const StepStats& s) {
  if (!r) return;
  r->stepped = 1;
  r->step = s.step;
  r->loss = s.loss;
  r->lr = s.lr;
  r->grad_norm = s.grad_norm;
  r->ms = s.ms;
  r->tokens_per_s = s.tokens_per_s;
}

zt_status register_trainer(std::unique_ptr<zt_trainer> t, zt_trainer** out) {
  std::lock_guard lock(g_live_mutex);
  g_live.insert(t.get());
  *out = t.release();
  return ZT_OK;
}

}  // namespace

zt_status create_trainer(const char* config, const std::function<std::unique_ptr<Communicator>()>& make_comm,
                         zt_trainer** out) {
  g_error.clear();
  if (!out) return fail_with(ZT_ERR_ARGUMENT, "zt_trainer_create: out is NULL");
  *out = nullptr;
  if (!config) return fail_with(ZT_ERR_ARGUMENT, "zt_trainer_create: config is NULL");
  forget_failing_together();
  try {
    auto t = std::make_unique<zt_trainer>();
    t->own_comm = make_comm();
    Config cfg;
    agreed<ConfigError>(*t->own_comm, "reading the configuration",
                        [&] { cfg = load_config_text(config, BatchSource::caller); });
    t->trainer = std::make_unique<Trainer>(cfg, *t->own_comm);
    return register_trainer(std::move(t), out);
  } catch (...) {
    return status_of_current_exception("zt_trainer_create");
  }
}

zt_status create_trainer(const Config& cfg, Communicator& comm, zt_trainer** out) {
  g_error.clear();
  forget_failing_together();
  try {
    auto t = std::make_unique<zt_trainer>();
    t->trainer = std::make_unique<Trainer>(cfg, comm);
    return register_trainer(std::move(t), out);
  } catch (...) {
    return status_of_current_exception("zt_trainer_create");
  }
}

}  // namespace zt::api

using zt::api::with_trainer;

extern "C" {

ZT_API int zt_api_version(void) { return ZT_API_VERSION; }
ZT_API const char* zt_version(void) { return "0.1.0"; }
ZT_API const char* zt_last_error(void) { return zt::api::g_error.c_str(); }

ZT_API const char* zt_status_name(zt_status status) {
  switch (status) {
    case ZT_OK: return "ZT_OK";
    case ZT_ERR_ARGUMENT: return "ZT_ERR_ARGUMENT";
    case ZT_ERR_CONFIG: return "ZT_ERR_CONFIG";
    case ZT_ERR_DATA: return "ZT_ERR_DATA";
    case ZT_ERR_CHECKPOINT: return "ZT_ERR_CHECKPOINT";
    case ZT_ERR_COMM: return "ZT_ERR_COMM";
    case ZT_ERR_NONFINITE: return "ZT_ERR_NONFINITE";
    case ZT_ERR_MEMORY: return "ZT_ERR_MEMORY";
    case ZT_ERR_FAILED: return "ZT_ERR_FAILED";
    case ZT_ERR_UNSUPPORTED: return "ZT_ERR_UNSUPPORTED";
    case ZT_ERR_RUNTIME: return "ZT_ERR_RUNTIME";
  }
  return "(not a zt_status)";
}

ZT_API zt_status zt_trainer_create_local(const char* config, zt_trainer** out) {
  return zt::api::create_trainer(config, [] { return zt::make_self_communicator(); }, out);
}

ZT_API zt_status zt_trainer_destroy(zt_trainer* t) {
  zt::api::g_error.clear();
  if (!t) return ZT_OK;
  {
    std::lock_guard lock(zt::api::g_live_mutex);
    if (zt::api::g_live.count(t) == 0)
      return zt::api::fail_with(ZT_ERR_ARGUMENT, "zt_trainer_destroy: not a live trainer (destroyed already, or never "
                                                 "made by zt_trainer_create)");
    if (t->busy) return zt::api::fail_with(ZT_ERR_ARGUMENT, std::string("zt_trainer_destroy: ") + zt::api::kInUse);
    zt::api::g_live.erase(t);
  }
  try {
    zt::Allocator& device = t->trainer->comm().memory();
    delete t;
    // The last trainer gone, the blocks the allocators kept for reuse go back too: the library
    // holds nothing of a trainer's after it (bench/RESULTS.md, the embedding API's memory).
    bool last = false;
    {
      std::lock_guard lock(zt::api::g_live_mutex);
      last = zt::api::g_live.empty();
    }
    if (last) zt::empty_caches(device);
    return ZT_OK;
  } catch (...) {  // a destructor that throws (none should): the memory is gone either way
    return zt::api::status_of_current_exception("zt_trainer_destroy");
  }
}

ZT_API zt_status zt_trainer_step(zt_trainer* t, const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                 zt_step_result* result) {
  return with_trainer(t, "zt_trainer_step", {ZT_ERR_ARGUMENT}, [&](zt::Trainer& tr) {
    zt::api::check_micro_batch(tr, tokens, targets, B, T);
    t->tokens.insert(t->tokens.end(), tokens, tokens + B * T);
    t->targets.insert(t->targets.end(), targets, targets + B * T);
    if (int64_t(t->tokens.size()) < tr.config().grad_accum * B * T) {
      if (result) *result = {0, tr.steps_done(), std::numeric_limits<double>::quiet_NaN(), 0, 0, 0, 0};
      return;
    }
    const zt::StepStats s = tr.step(t->tokens.data(), t->targets.data());
    t->tokens.clear();
    t->targets.clear();
    t->metrics = zt::metrics_json(s);
    zt::api::fill(result, s);
  });
}

ZT_API zt_status zt_trainer_step_data(zt_trainer* t, zt_step_result* result) {
  return with_trainer(t, "zt_trainer_step_data", {ZT_ERR_CONFIG}, [&](zt::Trainer& tr) {
    zt::agreed<zt::ConfigError>(tr.host_comm(), "checking data.train", [&] {
      if (!tr.has_train_data()) throw zt::ConfigError("config: data.train: none given, so there is no data to step over");
      const zt::Config& c = tr.config();
      if (!t->tokens.empty())
        throw zt::ConfigError("zt_trainer_step_data: " + std::to_string(t->tokens.size() / (c.micro_batch * c.data.seq_len)) +
                              " micro-batches of zt_trainer_step wait for the rest of their accumulation");
    });
    const zt::StepStats s = tr.step();
    t->metrics = zt::metrics_json(s);
    zt::api::fill(result, s);
  });
}

ZT_API zt_status zt_trainer_run(zt_trainer* t) {
  return with_trainer(t, "zt_trainer_run", {}, [&](zt::Trainer& tr) {
    tr.run([t](const std::string& line) { zt::api::log_line(*t, line); });
  });
}

ZT_API zt_status zt_trainer_eval(zt_trainer* t, const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                                 double* loss) {
  return with_trainer(t, "zt_trainer_eval", {ZT_ERR_ARGUMENT, ZT_ERR_CONFIG}, [&](zt::Trainer& tr) {
    if (!loss) throw std::invalid_argument("loss is NULL");
    if (!tokens) {
      zt::agreed<zt::ConfigError>(tr.host_comm(), "checking the validation data", [&] {
        if (!tr.has_validation())
          throw zt::ConfigError("zt_trainer_eval: no validation data is configured (data.val, or with train.val_interval "
                                "> 0 the held-out data.val_fraction of bytes or chat data.train): pass a batch");
      });
      *loss = tr.validate();
      return;
    }
    zt::api::check_micro_batch(tr, tokens, targets, B, T);
    *loss = tr.evaluate(tokens, targets);
  });
}

ZT_API zt_status zt_trainer_save(zt_trainer* t, const char* dir) {
  return with_trainer(t, "zt_trainer_save", {ZT_ERR_CHECKPOINT}, [&](zt::Trainer& tr) {
    const double seconds = tr.save(dir ? dir : "");
    char buf[64];
    std::snprintf(buf, sizeof buf, " (%.2f s)", seconds);
    zt::api::log_line(*t, "saved checkpoint " + std::string(dir ? dir : tr.config().checkpoint.dir) + "/step_" +
                              std::to_string(tr.steps_done()) + buf);
  });
}

ZT_API zt_status zt_trainer_load(zt_trainer* t, const char* dir) {
  return with_trainer(t, "zt_trainer_load", {ZT_ERR_ARGUMENT}, [&](zt::Trainer& tr) {
    zt::agreed<std::invalid_argument>(tr.host_comm(), "checking the folder",
                                      [&] { if (!dir) throw std::invalid_argument("dir is NULL"); });
    t->tokens.clear();  // micro-batches of an accumulation the checkpoint does not know of
    t->targets.clear();
    tr.resume_from(dir);
  });
}

ZT_API zt_status zt_trainer_export(zt_trainer* t, const char* format, const char* path) {
  return with_trainer(t, "zt_trainer_export", {ZT_ERR_ARGUMENT, ZT_ERR_CHECKPOINT, ZT_ERR_RUNTIME}, [&](zt::Trainer& tr) {
    zt::agreed<std::invalid_argument>(tr.host_comm(), "checking the format", [&] {
      if (!format || !path) throw std::invalid_argument(std::string(!format ? "format" : "path") + " is NULL");
      const std::string f = format;
      if (f != "safetensors" && f != "llmc")
        throw std::invalid_argument("format \"" + f + "\": \"safetensors\" or \"llmc\"");
      if (f == "llmc" && !zt::model_spec(tr.model().arch()).llmc)
        throw std::invalid_argument("llm.c's format holds GPT-2 only; model.arch is \"" + tr.model().arch() +
                                    "\": write \"safetensors\"");
    });
    tr.write_model(path, format, "zt_trainer_export");
  });
}

ZT_API zt_status zt_trainer_metrics(zt_trainer* t, const char** json) {
  zt::api::g_error.clear();
  const zt::api::Claim claim(t, "zt_trainer_metrics");
  if (claim.status() != ZT_OK) return claim.status();
  if (!json) return zt::api::fail_with(ZT_ERR_ARGUMENT, "zt_trainer_metrics: json is NULL");
  *json = t->metrics.c_str();  // a failed trainer's last metrics are still worth reading
  return ZT_OK;
}

ZT_API zt_status zt_trainer_set_lr(zt_trainer* t, double lr) {
  return with_trainer(t, "zt_trainer_set_lr", {ZT_ERR_ARGUMENT}, [&](zt::Trainer& tr) {
    if (!std::isfinite(lr) || lr < 0) throw std::invalid_argument("lr must be finite and >= 0, got " + std::to_string(lr));
    tr.set_lr(lr);
  });
}

ZT_API zt_status zt_trainer_set_log(zt_trainer* t, zt_log_fn fn, void* user) {
  return with_trainer(t, "zt_trainer_set_log", {}, [&](zt::Trainer&) {
    t->log = nullptr;
    if (fn) t->log = [fn, user](const std::string& line) { fn(user, line.c_str()); };
  });
}

}  // extern "C"
