// A training pass of the model's own code on the meta device, for `ztrain estimate`'s
// activations. [Note: activations by the model's own code]
//
// [Note: activations by the model's own code] The estimate does not describe a model's tape: it
// runs it. A twin of the model (make_model, the same architecture and units) is bound to meta
// tensors that are charged nothing, since the ghost step's ShardedUnits charge parameters and
// gradients where they hold them; its forward records the tape over meta activations and Tape::backward frees them,
// so the meta ledger ([Note: the meta device] in tensor/meta_allocator.hpp) sees every output,
// saved tensor and activation gradient come and go where kernels/ops.cpp and tensor/tape.cpp make
// and drop them, between the same unit hooks the ZeRO scheduler answers in a real run. A new op
// or model is estimated as it runs, with no change here.
// Besides, the pass charges what the trainer holds in host memory, which on the CPU is the same
// ledger: its (B,T) i32 token and target batches (other), and among the activations the loss, from
// the forward's return until the pass has ended (in a real run it appears inside the
// cross-entropy, beside the row losses freed as it returns: 4 bytes off at a point under the
// backward's peak, where one (B,T,C) gradient outweighs them), and the backward's seed, until the
// loss's own backward drops it.
#pragma once

#include <functional>
#include <memory>

#include "models/model.hpp"
#include "tensor/meta_allocator.hpp"
#include "tensor/tape.hpp"

namespace zt {

class MetaPass {
 public:
  // Passes of `model`'s architecture and units on (B,T) micro-batches, charged to `meta`, which
  // outlives the pass, with parameters (and so activations) of dtype `compute`: f32 as the CPU
  // computes, or bf16 as a CUDA run computes ([Note: compute in 16 bits]).
  MetaPass(const Model& model, MetaAllocator& meta, int B, int T, DType compute = DType::f32);
  ~MetaPass();
  MetaPass(const MetaPass&) = delete;
  MetaPass& operator=(const MetaPass&) = delete;

  // One micro-batch as Trainer::step runs it: forward and backward with `hooks` around each unit
  // ([Note: unit hooks] in tensor/tape.hpp), then end_pass() while the loss is still held.
  void run(const UnitHooks& hooks, const std::function<void()>& end_pass);

 private:
  MetaAllocator& meta_;
  std::unique_ptr<Allocator> host_;  // host memory charged to meta_'s ledger
  std::unique_ptr<Model> model_;
  Tape tape_;
  Tensor tokens_, targets_;  // zeros: valid ids, and the only data anything reads
};

}  // namespace zt
