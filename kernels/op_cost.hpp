// What each op costs, from the shapes it is called with: `ztrain simulate`'s compute model.
//
// [Note: op costs] The meta backend (kernels/meta/backend.cpp) computes nothing, but it sees every
// op the model's own forward and backward call, with the real shapes. While an OpCostScope is
// alive on a thread, each of its ops there reports its class, its floating-point operations and
// the bytes it reads and writes (each tensor counted once per pass over it, in its own dtype). GEMMs count 2 flops a multiply-add; attention the
// causal half of its two products in the forward and twice that in the backward (dQ, dK, dV:
// four products); every other op is memory-bound and counts no flops. The flat-buffer ops the
// ZeRO engine's units call on their buffers (cast, accumulate, AdamW, the norm's sum of squares)
// report as `flat` work, named as the simulator lists it ("cast", "accumulate", "adamw", "norm"):
// a ghost step runs the real units on the meta device, so their work is priced where they do it.
#pragma once

#include <cstdint>

namespace zt {

enum class OpClass : uint8_t { gemm, attention, memory };
inline constexpr int kOpClasses = 3;
inline const char* op_class_name(OpClass c) {
  return c == OpClass::gemm ? "gemm" : c == OpClass::attention ? "attention" : "memory";
}

struct OpCost {
  const char* op;  // the backend method, e.g. "matmul_backward"
  OpClass cls;
  double flops;
  double bytes;  // read + written
  bool flat = false;  // the engine's work over flat buffers, not the model's
};

class OpCostSink {
 public:
  virtual ~OpCostSink() = default;
  virtual void add(const OpCost& c) = 0;
};

// While alive, the meta backend's ops on this thread report to `sink` (scopes nest; the innermost
// wins).
class OpCostScope {
 public:
  explicit OpCostScope(OpCostSink* sink);
  ~OpCostScope();
  OpCostScope(const OpCostScope&) = delete;
  OpCostScope& operator=(const OpCostScope&) = delete;

 private:
  OpCostSink* previous_;
};

}  // namespace zt
