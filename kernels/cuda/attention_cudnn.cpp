// cuDNN's fused attention behind kernels/cuda/attention_cudnn.hpp: one graph per direction and
// shape, built on first use (validate, operation graph, heuristic mode A's plans, support check)
// and cached per device with the device's cuDNN handle, as kernels/cuda/cublaslt.cpp caches
// cuBLASLt's plans. The heads are read in place from qkv through strides, so nothing is copied:
// Q (B,NH,T,hs) has strides (T*ld, hs, ld, 1) over qkv's rows of ld = (NH+2*NKV)*hs elements, K
// and V the same from columns NH*hs and (NH+NKV)*hs on; cuDNN groups the query heads over the kv
// heads itself.
#include "kernels/cuda/attention_cudnn.hpp"

#include <cudnn.h>

// The frontend carries its own copy of nlohmann-json for its plan serialisation, which ztrain
// does not use; leaving it out keeps one JSON library in the program.
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include <cudnn_frontend.h>

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace zt::cuda::cudnn {

namespace fe = cudnn_frontend;

namespace {

void check_cudnn(cudnnStatus_t st, const char* what) {
  if (st != CUDNN_STATUS_SUCCESS) throw CudaError(std::string(what) + ": " + cudnnGetErrorString(st));
}

// The tensors' ids in a graph's variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// A graph's shape and options: scale as attention_scale gives it, window as attention_window
// (T: none).
struct Shape {
  bool backward;
  int B, T, NH, NKV, hs;
  float scale;
  int window;
  auto operator<=>(const Shape&) const = default;
  int64_t ld() const { return int64_t{NH + 2 * NKV} * hs; }
  std::string str() const {
    return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
           " NKV=" + std::to_string(NKV) + " hs=" + std::to_string(hs) + " scale=" + std::to_string(scale) +
           (window < T ? " window=" + std::to_string(window) : "");
  }
};

// Throws for a frontend call that failed: std::invalid_argument while the graph is being made
// (cuDNN has no engine for these sizes), CudaError where running it failed.
void check_fe(fe::error_t e, const Shape& s, const char* step, bool building) {
  if (e.is_good()) return;
  const std::string msg = std::string("cudnn attention ") + (s.backward ? "backward" : "forward") + " (" + s.str() +
                          "): " + step + ": " + e.get_message();
  if (building)
    throw std::invalid_argument(msg + " (cuDNN has no fused attention for this shape on this GPU; "
                                      "train.attention \"ztrain\" runs our own kernels)");
  throw CudaError(msg);
}

// t as the (B, n_heads, T, hs) view of heads starting at some column of a (B,T,ld) array.
fe::graph::Tensor_attributes& as_heads(fe::graph::Tensor_attributes& t, Uid uid, const Shape& s, int n_heads,
                                       int64_t ld) {
  return t.set_uid(uid).set_dim({s.B, n_heads, s.T, s.hs}).set_stride({int64_t{s.T} * ld, s.hs, ld, 1});
}
// t as the softmax statistics: (B, NH, T, 1) f32, our lse's layout.
fe::graph::Tensor_attributes& as_stats(fe::graph::Tensor_attributes& t, const Shape& s) {
  return t.set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({s.B, s.NH, s.T, 1})
      .set_stride({int64_t{s.NH} * s.T, s.T, 1, 1});
}
// A graph input: `name`'s heads as as_heads lays them out.
std::shared_ptr<fe::graph::Tensor_attributes> input_heads(fe::graph::Graph& g, const char* name, Uid uid,
                                                          const Shape& s, int n_heads, int64_t ld) {
  fe::graph::Tensor_attributes t;
  t.set_name(name);
  return g.tensor(as_heads(t, uid, s, n_heads, ld));
}

std::shared_ptr<fe::graph::Graph> make_graph(const Shape& s, cudnnHandle_t handle) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t ld = s.ld(), C = int64_t{s.NH} * s.hs;
  auto q = input_heads(*g, "Q", kQ, s, s.NH, ld), k = input_heads(*g, "K", kK, s, s.NKV, ld),
       v = input_heads(*g, "V", kV, s, s.NKV, ld);
  // Causal: key j is seen by query i when j <= i (the diagonal band's right bound 0, aligned
  // top-left, Q and K being the same length); with a window also when j + window > i (its left
  // bound). No left bound without one, so that the graph is the one it always was.
  if (!s.backward) {
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("attention_forward")
                    .set_generate_stats(true)
                    .set_attn_scale(s.scale)
                    .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                    .set_diagonal_band_right_bound(0);
    if (s.window < s.T) opts.set_diagonal_band_left_bound(s.window);
    auto [o, stats] = g->sdpa(q, k, v, opts);
    as_heads(*o, kO, s, s.NH, C).set_output(true);
    as_stats(*stats, s).set_output(true);
  } else {
    auto o = input_heads(*g, "O", kO, s, s.NH, C), dout = input_heads(*g, "dO", kDO, s, s.NH, C);
    fe::graph::Tensor_attributes st;
    st.set_name("Stats");
    auto stats = g->tensor(as_stats(st, s));
    // Deterministic: the offload and checkpoint tests compare runs bit for bit.
    auto opts = fe::graph::SDPA_backward_attributes()
                    .set_name("attention_backward")
                    .set_attn_scale(s.scale)
                    .set_deterministic_algorithm(true)
                    .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                    .set_diagonal_band_right_bound(0);
    if (s.window < s.T) opts.set_diagonal_band_left_bound(s.window);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, opts);
    as_heads(*dq, kDQ, s, s.NH, ld).set_output(true);
    as_heads(*dk, kDK, s, s.NKV, ld).set_output(true);
    as_heads(*dv, kDV, s, s.NKV, ld).set_output(true);
  }
  check_fe(g->validate(), s, "validate", true);
  check_fe(g->build_operation_graph(handle), s, "build_operation_graph", true);
  check_fe(g->create_execution_plans({fe::HeurMode_t::A}), s, "create_execution_plans", true);
  check_fe(g->check_support(), s, "check_support", true);
  check_fe(g->build_plans(), s, "build_plans", true);
  return g;
}

// One device's handle and graphs. Ops on several streams share them under the mutex; the handle
// is pointed at the op's stream for its launch.
struct Context {
  std::mutex mu;
  cudnnHandle_t handle = nullptr;
  std::map<Shape, std::shared_ptr<fe::graph::Graph>> graphs;
  Context() { check_cudnn(cudnnCreate(&handle), "cudnnCreate"); }
  ~Context() { cudnnDestroy(handle); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
};

Context& context() {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<Context>> per_device;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  const std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<Context>& c = per_device[dev];
  if (!c) c = std::make_unique<Context>();
  return *c;
}

Shape shape_of(bool backward, int B, int T, int C, int NH, int NKV, const AttentionOptions& opt) {
  const char* op = backward ? "cudnn attention_backward" : "cudnn attention_forward";
  if (B <= 0 || T <= 0 || NH <= 0 || C <= 0 || C % NH != 0 || NKV <= 0 || NH % NKV != 0)
    throw std::invalid_argument(std::string(op) + ": B = " + std::to_string(B) + ", T = " + std::to_string(T) +
                                ", C = " + std::to_string(C) + " over NH = " + std::to_string(NH) +
                                " query heads and NKV = " + std::to_string(NKV) + " key/value heads do not fit");
  return {backward, B, T, NH, NKV, C / NH, attention_scale(opt, C / NH), attention_window(opt, T)};
}

void run(const Shape& s, std::unordered_map<int64_t, void*>& pack, const Workspace& workspace, cudaStream_t st) {
  Context& c = context();
  const std::lock_guard<std::mutex> lock(c.mu);
  std::shared_ptr<fe::graph::Graph>& g = c.graphs[s];
  if (!g) {
    try {
      g = make_graph(s, c.handle);
    } catch (...) {
      c.graphs.erase(s);  // asked again, it fails again with its message
      throw;
    }
  }
  int64_t bytes = 0;
  check_fe(g->get_workspace_size(bytes), s, "get_workspace_size", false);
  void* ws = bytes > 0 ? workspace(static_cast<size_t>(bytes)) : nullptr;
  check_cudnn(cudnnSetStream(c.handle, st), "cudnnSetStream");
  check_fe(g->execute(c.handle, pack, ws), s, "execute", false);
}

// pack[q], pack[k], pack[v] = where the query, key and value heads of a (B,T,ld) array start.
void add_heads(std::unordered_map<int64_t, void*>& pack, Uid q, Uid k, Uid v, const bf16* base, const Shape& s) {
  auto* p = const_cast<bf16*>(base);  // the variant pack takes void*; cuDNN only reads its inputs
  pack[q] = p;
  pack[k] = p + int64_t{s.NH} * s.hs;
  pack[v] = p + int64_t{s.NH + s.NKV} * s.hs;
}

}  // namespace

bool available() { return true; }

void attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, int NKV,
                       const AttentionOptions& opt, const Workspace& workspace, cudaStream_t s) {
  const Shape sh = shape_of(false, B, T, C, NH, NKV, opt);
  std::unordered_map<int64_t, void*> pack{{kO, out}, {kStats, lse}};
  add_heads(pack, kQ, kK, kV, qkv, sh);
  run(sh, pack, workspace, s);
}

void attention_backward(bf16* grad, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, int B, int T,
                        int C, int NH, int NKV, const AttentionOptions& opt, const Workspace& workspace,
                        cudaStream_t s) {
  const Shape sh = shape_of(true, B, T, C, NH, NKV, opt);
  std::unordered_map<int64_t, void*> pack{
      {kO, const_cast<bf16*>(out)}, {kDO, const_cast<bf16*>(dout)}, {kStats, const_cast<float*>(lse)}};
  add_heads(pack, kQ, kK, kV, qkv, sh);
  add_heads(pack, kDQ, kDK, kDV, grad, sh);
  run(sh, pack, workspace, s);
}

}  // namespace zt::cuda::cudnn
