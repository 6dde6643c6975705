#include "runtime/train/trainer.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "comm/nccl_communicator.hpp"
#include "kernels/backend.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/kernels.hpp"
#include "models/registry.hpp"
#include "runtime/agreed.hpp"
#include "runtime/agreement.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/checkpoint/model_writer.hpp"
#include "runtime/train/memory_floor.hpp"
#include "runtime/train/metrics.hpp"
#include "runtime/train/monitor.hpp"
#include "runtime/train/outputs.hpp"
#include "runtime/train/schedule.hpp"
#include "runtime/checkpoint/weights.hpp"
#include "models/init.hpp"
#include "models/peft_format.hpp"

namespace zt {

ModelDims resolve_dims(const Config& cfg) {
  const ModelConfig& m = cfg.model;
  if (!m.init_from) return derive_dims(m.dims);
  const StoredModel stored = stored_model(*m.init_from);
  if (stored.arch != m.arch)
    throw ConfigError("config: model.arch: \"" + m.arch + "\" disagrees with \"" + stored.arch +
                      "\" in the checkpoint '" + *m.init_from + "'");
  const ModelDims& d = stored.dims;
  for_each_dim(
      [&](const char* key, const auto& given, const auto& stored) {
        for (const std::string& g : m.given)
          if (g == key && !(given == stored))
            throw ConfigError("config: model." + g + ": " + dim_text(given) + " disagrees with " + dim_text(stored) +
                              " in the checkpoint '" + *m.init_from + "'");
      },
      m.dims, d);
  return d;
}

std::unique_ptr<Model> make_run_model(const Config& cfg, const ModelDims& dims, int embedding_units) {
  std::unique_ptr<Model> model = make_model(cfg.model.arch, dims, embedding_units);
  model->set_checkpointing(cfg.activation_checkpointing);
  if (!cfg.lora.enabled()) return model;
  try {
    model->apply_lora(cfg.lora);
  } catch (const std::invalid_argument& e) {  // names lora.<key>, as every rank sees alike
    throw ConfigError("config: " + std::string(e.what()));
  }
  return model;
}

int train_threads(const Config& cfg, int ranks_here) {
  return cfg.train.threads ? cfg.train.threads : std::max(1, omp_get_num_procs() / ranks_here);
}

namespace {
// LoRA's dropout masks: this rank's own stream, as each DDP rank draws its own ([Note: dropout
// masks] in kernels/backend.hpp).
uint64_t dropout_stream(const Config& cfg, int rank) { return mix_seed(cfg.train.seed ^ (uint64_t(rank) << 48)); }

std::chrono::milliseconds comm_timeout(const Config& cfg) {
  return std::chrono::milliseconds(static_cast<int64_t>(cfg.train.comm_timeout_s * 1000.0));
}

// [Note: ranks agree on the run] in runtime/agreement.hpp: first of all, within the run's timeout.
const Config& settings_agreed(const Config& cfg, Communicator& comm) {
  comm.set_timeout(comm_timeout(cfg));
  agree_on_settings(cfg, comm);
  return cfg;
}
}  // namespace

Trainer::Trainer(const Config& cfg) : Trainer(cfg, make_self_communicator()) {}

// `own` outlives the delegated constructor, so it is freed even when that one throws.
Trainer::Trainer(const Config& cfg, std::unique_ptr<Communicator> own) : Trainer(cfg, *own) {
  own_comm_ = std::move(own);
}

Trainer::Trainer(const Config& cfg, Communicator& comm)
    : cfg_(settings_agreed(cfg, comm)),
      device_comm_(cfg.train.device == "cuda" ? make_nccl_communicator(comm) : nullptr),
      comm_(device_comm_ ? *device_comm_ : comm),
      host_comm_(comm),
      B_(cfg.micro_batch), T_(cfg.data.seq_len), scaler_(cfg.precision) {
  cpu::set_num_threads(train_threads(cfg, comm_.local_size()));
  // A progress thread moves collectives only when it has a core to run on; where the compute
  // threads take them all, polling at unit boundaries hides more (bench/RESULTS.md, overlap).
  const std::string& progress = cfg.train.comm_progress;
  if (progress == "auto" && !std::getenv("ZT_MPI_PROGRESS"))
    comm_.set_progress(cpu::num_threads() * comm_.local_size() >= omp_get_num_procs() ? CommProgress::poll
                                                                                      : CommProgress::thread);
  else if (progress != "auto")
    comm_.set_progress(progress == "poll" ? CommProgress::poll : CommProgress::thread);
  comm_.set_timeout(comm_timeout(cfg_));
  // Checked together: most of these fail alike on every rank; model.init_from and the host's
  // memory are each rank's own ([Note: failing together]).
  ModelDims dims;
  const bool on_device = comm_.memory().device() != Device::cpu;
  agreed<ConfigError>(host_comm_, "checking the settings", [&] {
    dims = resolve_dims(cfg_);
    check_batch_size(cfg_, comm_.size());
    shard_group_ranks(cfg_.zero, comm_.size(), comm_.local_size());  // [Note: shard groups]
    if (cfg_.data.format == "bytes" && dims.vocab_size < 256)
      throw ConfigError("config: model.vocab_size: " + std::to_string(dims.vocab_size) +
                        " is smaller than the byte vocabulary (256)");
    if (T_ > dims.max_seq_len)
      throw ConfigError("config: data.seq_len: " + std::to_string(T_) + " exceeds the model's max_seq_len " +
                        std::to_string(dims.max_seq_len));
    if (cfg_.model.wte_units > 0 && dims.padded_vocab_size % cfg_.model.wte_units != 0)
      throw ConfigError("config: model.wte_units: " + std::to_string(cfg_.model.wte_units) +
                        " does not divide padded_vocab_size " + std::to_string(dims.padded_vocab_size));
    // The CUDA cross-entropy takes the logits in one piece: the head is one unit there.
    if (on_device && cfg_.model.wte_units > 1)
      throw ConfigError("config: model.wte_units: " + std::to_string(cfg_.model.wte_units) + " on device " +
                        cfg_.train.device + "; its cross-entropy kernel takes the logits whole (wte_units 1)");
    // [Note: memory floor]: before anything of the model is allocated.
    check_fits_host(cfg_, model_num_params_f64(cfg_.model.arch, dims), comm_.size(), comm_.local_size());
  });
  // Where the run writes is checked before anything long runs ([Note: outputs checked first],
  // [Note: one history per folder]).
  check_outputs(cfg_, host_comm_);
  if (cfg_.checkpoint.save_interval > 0) checkpoints_ = std::make_unique<CheckpointRoot>(cfg_, host_comm_);
  model_ = make_run_model(cfg_, dims, on_device ? 1 : cfg_.model.wte_units);
  model_->set_dropout_stream(dropout_stream(cfg_, comm_.rank()), 0);  // a resume sets the pass below
  if (cfg_.train.attention == "cudnn") {
    // The config check has seen to the device and dtype; whether the build reaches cuDNN is the
    // backend's to say.
    if (!backend(comm_.memory().device()).has_attention(AttentionKernel::cudnn))
      throw ConfigError("config: train.attention: \"cudnn\": this ztrain was built without cuDNN (libcudnn and the "
                        "cudnn_frontend headers that scripts/install-deps.sh installs); \"ztrain\" runs our own kernels");
    model_->set_attention_kernel(AttentionKernel::cudnn);
  }
  engine_ = std::make_unique<ZeroEngine>(*model_, tape_, comm_, cfg_.zero, cfg_.optimizer,
                                         dtype_from_name(cfg_.precision.dtype), cfg_.aio);
  if (const char* poison = std::getenv("ZT_POISON_GRADS")) {  // testing aid: "RANK:STEP"
    int rank = -1, step = -1;
    if (std::sscanf(poison, "%d:%d", &rank, &step) != 2)
      throw std::invalid_argument("ZT_POISON_GRADS: expected RANK:STEP, got '" + std::string(poison) + "'");
    if (rank == comm_.rank()) poison_step_ = step;
  }
  if (!cfg_.train.trace.empty()) {
    trace_ = std::make_unique<Trace>(comm_.rank());
    engine_->set_trace(trace_.get());
  }
  if (cfg_.model.init_from) {
    // The ledger's peak while reading against what stays: at stage 3 the difference is the one
    // unit held whole at a time ([Note: loading a shard]).
    const auto t0 = std::chrono::steady_clock::now();
    MemAccounting& ledger = comm_.memory().accounting();
    ledger.reset_peaks();
    load_weights_into(*cfg_.model.init_from, *model_, *engine_, cfg_.train.seed);
    const MemSnapshot m = ledger.snapshot();
    char buf[256];
    std::snprintf(buf, sizeof buf, "started from %s (%.2f s): this rank peaked at %.1f MiB while reading, and keeps %.1f MiB",
                  cfg_.model.init_from->c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  static_cast<double>(m.total_peak) / (1 << 20), static_cast<double>(m.total_current) / (1 << 20));
    loaded_ = buf;
  } else {
    engine_->init_params(cfg_.train.seed);
  }
  if (!cfg_.lora.init_from.empty()) {  // the adapters PEFT saved, over the initialised ones
    std::unique_ptr<PeftAdapters> start;
    agreed<ConfigError>(host_comm_, "reading lora.init_from", [&] {
      try {
        start = std::make_unique<PeftAdapters>(cfg_.lora.init_from, *model_);
      } catch (const std::runtime_error& e) {
        throw ConfigError("config: " + std::string(e.what()));
      }
    });
    engine_->write_params_by_unit(
        [&](int u, int64_t begin, int64_t end) {
          const Tensor host = Tensor::empty({model_->layout()[size_t(u)].numel}, DType::f32, MemCategory::other);
          start->read_unit(u, host.data<float>());
          store_f32(engine_->units()[u].param_view().view(begin, {end - begin}), host.view(begin, {end - begin}));
        },
        model_->base_units());
  }

  // Without data.train the batches come from the caller only (Trainer::step(inputs, targets)).
  // Bytes and chat data without data.val hold their last data.val_fraction out for validation, and
  // only when the run validates: with train.val_interval 0 all of data.train trains (a small
  // chat set would otherwise need ten global batches of conversations to train at all).
  const bool held_out = cfg_.data.val.empty() && (cfg_.data.format == "bytes" || cfg_.data.format == "chat") &&
                        cfg_.train.val_interval > 0;
  if (!cfg_.data.train.empty())
    train_ = make_loader(cfg_.data, held_out || !cfg_.data.val.empty() ? Split::train : Split::all, B_, T_, comm_.rank(),
                         comm_.size(), cfg_.train.seed);
  if (train_ && (!cfg_.data.val.empty() || held_out))
    val_ = make_loader(cfg_.data, Split::val, B_, T_, comm_.rank(), comm_.size(), cfg_.train.seed);
  for (DataLoader* l : {train_.get(), val_.get()})
    if (l) l->limit_tokens(dims.vocab_size);
  // More validation batches than the data holds would wrap around and count some batches twice:
  // validation covers the data once instead, and says so. Every rank holds as many batches.
  if (val_ && cfg_.train.val_interval > 0 && cfg_.train.val_batches > val_->batches_per_epoch()) {
    const int64_t held = val_->batches_per_epoch();
    val_note_ = "warning: train.val_batches " + std::to_string(cfg_.train.val_batches) + " is more than the " +
                std::to_string(held) + " batches the validation data holds (" +
                (cfg_.data.val.empty() ? "data.val_fraction of data.train" : "data.val '" + cfg_.data.val + "'") +
                "); each validation covers those " + std::to_string(held) + " once";
    cfg_.train.val_batches = static_cast<int>(held);
  }
  inputs_ = Tensor::empty({B_, T_}, DType::i32, MemCategory::other);
  targets_ = Tensor::empty({B_, T_}, DType::i32, MemCategory::other);
  tape_.set_profile(&profile_);
  tape_.set_marker(&backend(comm_.memory().device()));  // NVTX ranges where the model is on a GPU
  if (!cfg_.train.resume.empty()) resume_from(cfg_.train.resume);
  if (!cfg_.train.metrics.empty() && comm_.rank() == 0)
    metrics_ = std::make_unique<MetricsWriter>(cfg_.train.metrics, cfg_.train.resume.empty() ? -1 : steps_done_);
  if (comm_.rank() == 0 && (cfg_.tensorboard.enabled || cfg_.csv_monitor.enabled))
    monitors_ = std::make_unique<Monitors>(cfg_, cfg_.train.resume.empty() ? -1 : steps_done_,
                                           static_cast<int64_t>(B_) * cfg_.grad_accum * comm_.size());
}

void Trainer::resume_from(const std::string& dir) {
  engine_->finish_update();  // an update still running behind must not land on the loaded states
  const auto t0 = std::chrono::steady_clock::now();
  const TrainPosition p = load_checkpoint(dir, cfg_, comm_, *model_, *engine_);
  char buf[160];
  std::snprintf(buf, sizeof buf, "resumed from %s at step %d (%.2f s)", dir.c_str(), p.steps_done,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  resumed_ = buf;
  last_saved_ = dir;
  if (p.steps_done == cfg_.train.steps)
    resumed_ += "\nwarning: the checkpoint is at train.steps (" + std::to_string(p.steps_done) +
                ") already: nothing left to train, only the outputs are written";
  steps_done_ = p.steps_done;
  updates_done_ = p.updates_done;
  model_->set_dropout_stream(dropout_stream(cfg_, comm_.rank()), uint64_t(p.steps_done) * uint64_t(cfg_.grad_accum));
  scaler_.restore(p.scaler);
  if (train_) {  // every step read grad_accum batches
    train_->reset();
    train_->skip(static_cast<int64_t>(p.steps_done) * cfg_.grad_accum);
  }
}

double Trainer::save(const std::string& root) {
  // An update still running behind ([Note: update behind the next forward]) is the step's I/O,
  // not the save's: it ends before the save's clock starts.
  engine_->finish_update();
  const auto t0 = std::chrono::steady_clock::now();
  TrainPosition p;
  p.steps_done = steps_done_;
  p.updates_done = updates_done_;
  p.scaler = scaler_.state();
  const bool configured = root.empty() || root == cfg_.checkpoint.dir;
  Config where = cfg_;
  if (!configured) where.checkpoint.dir = root;
  save_checkpoint(where, comm_, *model_, *engine_, p);
  last_saved_ = (std::filesystem::path(where.checkpoint.dir) / ("step_" + std::to_string(steps_done_))).string();
  if (checkpoints_ && configured) checkpoints_->saved(steps_done_);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

StepStats Trainer::step() {
  if (!train_) throw std::logic_error("Trainer::step() without data.train");  // run() and the API check first
  const int64_t bt = int64_t(B_) * T_;
  step_inputs_.resize(size_t(cfg_.grad_accum * bt));
  step_targets_.resize(size_t(cfg_.grad_accum * bt));
  for (int micro = 0; micro < cfg_.grad_accum; ++micro)
    train_->next(&step_inputs_[size_t(micro * bt)], &step_targets_[size_t(micro * bt)]);
  return step_on(step_inputs_.data(), step_targets_.data(), train_->masks_targets());
}

StepStats Trainer::step(const int32_t* inputs, const int32_t* targets) { return step_on(inputs, targets, true); }

void Trainer::check_batch(const int32_t* inputs, const int32_t* targets) const {
  if (!inputs || !targets) throw std::invalid_argument(std::string(!inputs ? "tokens" : "targets") + " is a null pointer");
  const int64_t n = int64_t(B_) * T_;
  const int vocab = model_->dims().vocab_size;
  auto where = [&](const char* what, int64_t i, int32_t v) {
    return std::string(what) + "[" + std::to_string(i) + "] (row " + std::to_string(i / T_) + ", position " +
           std::to_string(i % T_) + ") is " + std::to_string(v) + ", outside the model's vocabulary [0, " +
           std::to_string(vocab) + ")";
  };
  for (int64_t i = 0; i < n; ++i)
    if (inputs[i] < 0 || inputs[i] >= vocab) throw std::invalid_argument(where("tokens", i, inputs[i]));
  for (int64_t i = 0; i < n; ++i)
    if (targets[i] < -1 || targets[i] >= vocab)
      throw std::invalid_argument(where("targets", i, targets[i]) + " (-1 leaves a position out of the loss)");
}

StepStats Trainer::step_on(const int32_t* inputs, const int32_t* targets, bool may_mask) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  comm_.memory().accounting().reset_peaks();  // where the model lives
  const auto [intra_before, inter_before] = bytes_sent();
  engine_->begin_step();

  // [Note: masked loss] The step's loss is the mean over the targets it counts on every rank
  // (chat data leaves the prompt's out, as -1), and so is the gradient: micro-batch k's mean loss
  // seeds backward with W * counted_k / counted_all (W: the ranks, whose gradients are averaged),
  // so np, ZeRO stage and accumulation do not change what is trained, however the masks fall.
  // Without masks that weight is 1/accumulation, and the step counts nothing; a step that counted
  // and found nothing left out on any rank is trained and reported as one without masks, so the
  // caller's batches give the same numbers as token shards do. A global batch without a single
  // counted target has no mean: its step is skipped on every rank (no update), its loss NaN and
  // its metrics line says "no_targets", never a loss of 0.
  const int accum = cfg_.grad_accum;
  const double loss_scale = scaler_.scale();
  const int64_t bt = int64_t(B_) * T_;
  std::vector<int64_t> counted(size_t(accum), bt);
  if (may_mask)
    for (int micro = 0; micro < accum; ++micro)
      counted[size_t(micro)] = bt - std::count(targets + micro * bt, targets + (micro + 1) * bt, -1);
  const int64_t all = may_mask ? count_over_ranks(std::accumulate(counted.begin(), counted.end(), int64_t{0})) : 0;
  const bool masked = may_mask && all != int64_t(accum) * bt * comm_.size();
  const bool no_targets = may_mask && all == 0;
  double loss_sum = 0.0;
  for (int micro = 0; micro < accum; ++micro) {
    std::copy_n(inputs + micro * bt, bt, inputs_.data<int32_t>());
    std::copy_n(targets + micro * bt, bt, targets_.data<int32_t>());
    engine_->begin_pass(micro == accum - 1);
    Tensor loss = model_->forward(tape_, inputs_, targets_);
    const double weight = all > 0 ? double(comm_.size()) * double(counted[size_t(micro)]) / double(all) : 0.0;
    loss_sum += masked ? loss.data<float>()[0] * double(counted[size_t(micro)]) : loss.data<float>()[0];
    tape_.backward(loss, static_cast<float>(masked ? loss_scale * weight : loss_scale / accum));
    engine_->end_pass();
  }

  const auto update_start = clock::now();
  MarkedRange update_range(tape_.marker(), "norm+adamw");
  ++steps_done_;
  if (steps_done_ == poison_step_) engine_->poison_grads();
  // Reduced over the ranks, so inf or NaN on any rank is inf or NaN on every rank.
  const double loss = !masked      ? mean_over_ranks(loss_sum / accum)
                      : !no_targets ? sum_over_ranks(loss_sum) / double(all)
                                    : std::numeric_limits<double>::quiet_NaN();
  // fp16: an inf or NaN on any rank skips the step on every rank.
  const bool overflow = scaler_.active() && engine_->grads_overflowed();
  const double norm = overflow ? std::numeric_limits<double>::infinity() : engine_->grad_norm() / loss_scale;
  const bool nonfinite = !no_targets && (!std::isfinite(loss) || (!overflow && !std::isfinite(norm)));
  nonfinite_in_a_row_ = nonfinite ? nonfinite_in_a_row_ + 1 : no_targets ? nonfinite_in_a_row_ : 0;
  if (nonfinite_in_a_row_ > cfg_.train.skip_nonfinite_steps) throw_nonfinite(loss, norm);
  if (!nonfinite && !no_targets && checkpoints_) checkpoints_->confirm();  // [Note: keep_last waits for a finite step]
  const bool skipped = overflow || nonfinite || no_targets;
  const double lr = lr_override_ ? *lr_override_ : learning_rate(cfg_.scheduler, cfg_.optimizer.lr, updates_done_);
  if (!skipped) {
    // torch.nn.utils.clip_grad_norm_'s rule, so clipped runs compare with PyTorch's.
    double coef = 1.0;
    if (cfg_.gradient_clipping > 0.0) coef = std::min(1.0, cfg_.gradient_clipping / (norm + 1e-6));
    ++updates_done_;
    engine_->update(static_cast<float>(lr), static_cast<float>(coef / loss_scale), updates_done_);
  }
  scaler_.update(overflow);
  profile_.add("norm+adamw", false, std::chrono::duration<double>(clock::now() - update_start).count());

  StepStats s;
  s.step = steps_done_;
  s.loss = loss;
  s.lr = lr;
  s.grad_norm = norm;
  s.loss_scale = scaler_.active() ? loss_scale : 0.0;
  s.skipped = skipped;
  s.nonfinite = nonfinite;
  s.no_targets = no_targets;
  s.ms = std::chrono::duration<double, std::milli>(clock::now() - start).count();
  const double tokens = static_cast<double>(B_) * T_ * accum * comm_.size();
  s.tokens_per_s = tokens / (s.ms / 1e3);
  s.tflops = model_->flops_per_token(T_) * tokens / (s.ms / 1e3) / 1e12;
  s.mem = comm_.memory().accounting().snapshot();
  s.rss_peak = resident_peak_bytes();
  const auto [intra, inter] = bytes_sent();
  s.comm_bytes_inter = inter - inter_before;
  s.comm_bytes = s.comm_bytes_inter + intra - intra_before;
  if (metrics_) metrics_->write(s);
  if (monitors_) monitors_->write(s, steps_done_ - updates_done_);
  return s;
}

std::pair<uint64_t, uint64_t> Trainer::bytes_sent() const {
  const ShardGroups& g = engine_->groups();
  uint64_t intra = g.intra_bytes(), inter = g.inter_bytes();
  if (&host_comm_ != &comm_) (g.world_spans_groups() ? inter : intra) += host_comm_.bytes_sent();
  return {intra, inter};
}

void Trainer::throw_nonfinite(double loss, double norm) const {
  auto show = [](double x) {
    if (std::isnan(x)) return std::string("NaN");
    char b[32];
    std::snprintf(b, sizeof b, "%g", x);
    return std::string(b);
  };
  const std::string what = "step " + std::to_string(steps_done_) + ": loss " + show(loss) + ", gradient norm " + show(norm);
  const int limit = cfg_.train.skip_nonfinite_steps;
  std::string msg = what + " (inf or NaN on some rank)";
  if (limit > 0)
    msg += ", " + std::to_string(nonfinite_in_a_row_) + " such steps in a row, more than train.skip_nonfinite_steps " +
           std::to_string(limit) + " skips";
  msg += ": the run stops before this step's update";
  if (!last_saved_.empty())
    msg += "; the newest checkpoint is " + last_saved_ + ", and keep_last kept the ones before it";
  msg += limit > 0 ? "; the run diverges: lower the learning rate or resume from an earlier checkpoint"
                   : "; lower the learning rate, or let train.skip_nonfinite_steps skip such steps";
  // The loss and the norm are reduced over the ranks, so every rank stops here alike: rank 0 says
  // it ([Note: failing together]).
  mark_failing_together(comm_.rank() == 0);
  throw NonfiniteStep(msg);
}

double Trainer::validate() {
  if (!val_) throw std::logic_error("validate() without validation data");
  val_->reset();
  const bool masked = val_->masks_targets();
  double sum = 0.0;
  int64_t counted = 0;
  for (int i = 0; i < cfg_.train.val_batches; ++i) {
    val_->next(inputs_.data<int32_t>(), targets_.data<int32_t>());
    const auto [loss, n] = eval_batch(masked);
    sum += loss;
    counted += n;
  }
  if (!masked) return mean_over_ranks(sum / cfg_.train.val_batches);
  const int64_t all = count_over_ranks(counted);  // [Note: masked loss]
  return all > 0 ? sum_over_ranks(sum) / double(all) : std::numeric_limits<double>::quiet_NaN();
}

double Trainer::evaluate(const int32_t* inputs, const int32_t* targets) {
  const int64_t bt = int64_t(B_) * T_;
  std::copy_n(inputs, bt, inputs_.data<int32_t>());
  std::copy_n(targets, bt, targets_.data<int32_t>());
  const auto [sum, n] = eval_batch(true);
  const int64_t all = count_over_ranks(n);  // [Note: masked loss]
  if (all == bt * comm_.size()) return mean_over_ranks(sum / double(n));  // nothing left out: as validate()
  return all > 0 ? sum_over_ranks(sum) / double(all) : std::numeric_limits<double>::quiet_NaN();
}

std::pair<double, int64_t> Trainer::eval_batch(bool masked) {
  Tape::NoGrad no_grad(tape_);
  const int32_t* tg = targets_.data<int32_t>();
  const int64_t n = masked ? int64_t(B_) * T_ - std::count(tg, tg + int64_t(B_) * T_, -1) : 1;
  engine_->begin_pass(false);
  const double loss = model_->forward(tape_, inputs_, targets_).data<float>()[0] * double(n);
  engine_->end_pass();
  return {loss, n};
}

const Trace& Trainer::start_trace() {
  if (!trace_) {
    trace_ = std::make_unique<Trace>(comm_.rank());
    engine_->set_trace(trace_.get());
  }
  trace_->clear();
  return *trace_;
}

void Trainer::write_model(const std::string& path, const std::string& format, const std::string& what) {
  engine_->finish_update();
  agreed(host_comm_, what + ": writing '" + path + "'", [&] {
    write_gathered_model(*engine_, *model_, comm_.rank(), format, path, what, DType::f32);
  });
}

double Trainer::mean_over_ranks(double v) {
  if (comm_.size() == 1) return v;
  return comm_.all_reduce_value(static_cast<float>(v), ReduceOp::avg);
}

double Trainer::sum_over_ranks(double v) {
  if (comm_.size() == 1) return v;
  return comm_.all_reduce_value(static_cast<float>(v), ReduceOp::sum);
}

int64_t Trainer::count_over_ranks(int64_t n) {
  if (comm_.size() == 1) return n;
  // Floats add integers exactly below 2^24: the count goes as two halves of 12 bits and more.
  Tensor parts = Tensor::empty({2}, DType::f32, MemCategory::communication);
  parts.data<float>()[0] = static_cast<float>(n >> 12);
  parts.data<float>()[1] = static_cast<float>(n & 4095);
  host_comm_.all_reduce(parts, ReduceOp::sum);
  return (static_cast<int64_t>(parts.data<float>()[0]) << 12) + static_cast<int64_t>(parts.data<float>()[1]);
}

namespace {
// The lines a run starts with: the model, the batch, the ZeRO stage and precision, and warnings.
std::string run_banner(const Trainer& t) {
  const Config& c = t.config();
  const ModelDims& d = t.model().dims();
  static const char* const kSharded[] = {"nothing sharded (DDP)", "AdamW states sharded",
                                         "gradients and AdamW states sharded",
                                         "parameters, gradients and AdamW states sharded"};
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "model %s: n_layer %d, n_head %d, n_embd %d, vocab %d (padded %d), max_seq_len %d, %.2fM parameters\n"
                "batch: micro %d x accumulation %d x %d ranks (%s, %d on this host), seq_len %d (%d tokens a step); "
                "%d threads a rank%s; %d steps\n"
                "ZeRO stage %d: %s; %s; collectives progress by %s",
                t.model().arch().c_str(), d.n_layer, d.n_head, d.n_embd, d.vocab_size, d.padded_vocab_size, d.max_seq_len,
                static_cast<double>(t.model().num_params()) / 1e6, c.micro_batch, c.grad_accum, t.comm().size(),
                std::string(t.comm().backend()).c_str(), t.comm().local_size(), c.data.seq_len,
                c.micro_batch * c.grad_accum * t.comm().size() * c.data.seq_len, cpu::num_threads(),
                c.train.device == "cuda" ? "" : (std::string(", GEMM through ") + cpu::gemm_library()).c_str(), c.train.steps,
                c.zero.stage, kSharded[c.zero.stage],
                c.precision.dtype == "f32" ? "fp32" : c.precision.dtype == "bf16" ? "bf16 parameters and gradients, fp32 masters"
                                                                                   : "fp16 parameters and gradients, fp32 masters, loss scaling",
                t.comm().progress() == CommProgress::poll ? "polling at unit boundaries" : "a progress thread");
  std::string banner = buf;
  // An oversubscribed OpenMP team spins at its barriers: a step runs many times slower, not a bit.
  const int cores = omp_get_num_procs(), ranks_here = t.comm().local_size();
  if (cpu::num_threads() * ranks_here > cores)
    banner += "\nwarning: train.threads " + std::to_string(cpu::num_threads()) + " x " + std::to_string(ranks_here) +
              " ranks on this host exceed its " + std::to_string(cores) +
              " cores; steps will run many times slower (train.threads 0 shares the cores among the ranks)";
  if (const std::string groups = t.engine().groups().describe(); !groups.empty()) banner += "\n" + groups;
  if (const std::string off = t.engine().offload_summary(); !off.empty()) banner += "\n" + off;
  if (const LoraConfig& l = c.lora; l.enabled()) {
    const int64_t trainable = t.model().num_trainable_params();
    std::string targets;
    for (const std::string& m : l.targets(t.model().arch())) targets += (targets.empty() ? "" : ", ") + m;
    std::snprintf(buf, sizeof buf,
                  "LoRA r %d, alpha %g%s (scale %g) on %s: %.3fM trainable parameters of %.2fM (%.2f%%); the frozen "
                  "model %s",
                  l.r, l.alpha, l.use_rslora ? ", rsLoRA" : "", static_cast<double>(l.scale()), targets.c_str(),
                  static_cast<double>(trainable) / 1e6, static_cast<double>(t.model().num_params()) / 1e6,
                  100.0 * static_cast<double>(trainable) / static_cast<double>(t.model().num_params()),
                  c.zero.stage < 3                       ? "kept whole on every rank"
                  : c.zero.frozen_params == "replicated" ? "replicated on every rank (zero_optimization.frozen_params)"
                                                          : "sharded, gathered for each use (zero_optimization.frozen_params)");
    banner += "\n" + std::string(buf);
  }
  if (const ActivationCheckpointing& a = c.activation_checkpointing; a.enabled()) {
    int blocks = 0;
    for (int l = 0; l < t.model().dims().n_layer; ++l) blocks += a.checkpoints(l);
    banner += "\nactivation checkpointing: " + a.describe() + " (" + std::to_string(blocks) + " of " +
              std::to_string(t.model().dims().n_layer) + " blocks recomputed in backward)";
  }
  return banner;
}
}  // namespace

void Trainer::run(const std::function<void(const std::string&)>& log) {
  const TrainConfig& tc = cfg_.train;
  agreed<ConfigError>(host_comm_, "checking data.train", [&] {
    if (!train_)
      throw ConfigError("config: data.train: required key missing (a whole run reads its batches from it; "
                        "zt_trainer_step takes them from the caller instead)");
  });
  MetricsWriter* metrics = metrics_.get();
  log(run_banner(*this));
  if (!loaded_.empty()) log(loaded_);
  for (const DataLoader* l : {train_.get(), val_.get()})
    if (l && !l->summary().empty()) log(l->summary());
  if (!resumed_.empty()) log(resumed_);
  if (checkpoints_ && !checkpoints_->note().empty()) log(checkpoints_->note());
  if (!val_note_.empty()) log(val_note_);
  const bool validating = val_ && tc.val_interval > 0;
  if (validating) log(val_line(0, validate()));
  while (steps_done_ < tc.steps) {
    const StepStats s = step();
    if (s.step % cfg_.steps_per_print == 0 || s.step == 1 || s.step == tc.steps) log(progress_line(s, tc.steps));
    if (validating && (s.step % tc.val_interval == 0 || s.step == tc.steps)) {
      const double v = validate();
      if (metrics) metrics->write_val(s.step, v);
      if (monitors_) monitors_->write_val(s.step, v);
      log(val_line(s.step, v));
    }
    const int every = cfg_.checkpoint.save_interval;
    if (every > 0 && (s.step % every == 0 || s.step == tc.steps)) {
      const double seconds = save();
      char buf[96];
      std::snprintf(buf, sizeof buf, " (%.2f s)", seconds);
      log("saved checkpoint " + cfg_.checkpoint.dir + "/step_" + std::to_string(s.step) + buf);
    }
  }
  if (checkpoints_) checkpoints_->confirm();
  // Every rank takes part in gathering the parameters, a unit at a time; rank 0 writes them.
  if (!tc.save_model.empty()) {
    // [Note: export formats]: Hugging Face's names for a .safetensors path, llm.c's file otherwise.
    write_model(tc.save_model, tc.save_model.ends_with(".safetensors") ? "safetensors" : "llmc", "train.save_model");
    log("saved model to " + tc.save_model);
  }
  if (trace_) {
    trace_->write(comm_, tc.trace);
    log(trace_summary(*trace_, tc.trace));
  }
}

}  // namespace zt
