#include "runtime/plan/estimate_activations.hpp"

#include <cstdlib>
#include <new>

#include "models/registry.hpp"

namespace zt {

namespace {

// Host memory charged to another allocator's ledger: what the trainer of a CPU run holds on the
// host, where host and model memory are one ledger.
class LedgerHost final : public Allocator {
 public:
  explicit LedgerHost(MemAccounting& ledger) : ledger_(ledger) {}
  Device device() const override { return Device::cpu; }
  void* allocate(size_t bytes, MemCategory c) override {
    if (bytes == 0) return nullptr;
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    ledger_.add(c, bytes);
    return p;
  }
  void deallocate(void* p, size_t bytes, MemCategory c) override {
    if (!p) return;
    std::free(p);
    ledger_.sub(c, bytes);
  }

 private:
  MemAccounting& ledger_;
};

}  // namespace

MetaPass::MetaPass(const Model& model, MetaAllocator& meta, int B, int T, DType compute)
    : meta_(meta),
      host_(std::make_unique<LedgerHost>(meta.accounting())),
      model_(make_model(model.arch(), model.dims(), model.embedding_units())) {
  if (model.lora().enabled()) model_->apply_lora(model.lora());
  model_->set_checkpointing(model.checkpointing());  // what forward keeps and recomputes
  for (int u = 0; u < model_->num_units(); ++u) {
    const UnitLayout& lay = model_->layout()[size_t(u)];
    const int64_t n = lay.numel;
    // A frozen unit's parameters want no gradient, as the engine binds them.
    model_->bind_unit(u, Tensor::meta({n}, compute, MemCategory::parameters, meta),
                      lay.frozen() ? Tensor() : Tensor::meta({n}, compute, MemCategory::gradients, meta));
  }
  tokens_ = Tensor::zeros({B, T}, DType::i32, MemCategory::other, *host_);
  targets_ = Tensor::zeros({B, T}, DType::i32, MemCategory::other, *host_);
}

MetaPass::~MetaPass() = default;

void MetaPass::run(const UnitHooks& hooks, const std::function<void()>& end_pass) {
  tape_.set_hooks(hooks);
  const Tensor loss = model_->forward(tape_, tokens_, targets_);
  MemAccounting& ledger = meta_.accounting();
  ledger.add(MemCategory::activations, loss.nbytes());
  // The seed Tape::backward would make beside the loss, here where the ledger sees it: the tape
  // drops it after the loss's backward, as it drops the one it makes.
  loss.bind_grad(Tensor::empty(loss.shape(), loss.dtype(), MemCategory::activations, *host_));
  tape_.backward(loss);
  end_pass();
  ledger.sub(MemCategory::activations, loss.nbytes());
}

}  // namespace zt
