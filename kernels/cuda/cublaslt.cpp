#include "kernels/cuda/cublaslt.hpp"

#include <cublasLt.h>

#include <atomic>
#include <compare>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cuda/kernels.hpp"
#include "kernels/cuda/lazy_library.hpp"

namespace zt::cuda {

// [Note: one workspace, many streams] cuBLASLt's workspace is scratch that a GEMM's kernels use
// while they run, and one per device serves every stream. A GemmLease holds the device's lock for
// one op; its work goes on one stream, and when it ends it records `ready` there. The next op
// first makes its own stream wait for `ready`, so two ops never use the workspace at once. The
// event is recorded at the end of every lease rather than at the handover, so that the handover
// never touches a stream that may have been destroyed since; and the wait is made even on the
// same stream handle (where it costs nothing on the device), since a destroyed stream's handle may
// come back for a new stream while its work is still running.

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // what cuBLASLt asks for on Hopper

std::atomic<uint64_t> g_heuristic_queries{0};

// cuBLASLt's functions, from the library opened on the first GEMM on a GPU ([Note: GPU libraries
// on first use] in kernels/cuda/lazy_library.hpp): the process links none of it.
struct Lt {
  LazyLibrary lib{"libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR), "cuBLASLt"};
#define ZT_LT(f) decltype(&::f) f = lib.get<std::remove_pointer_t<decltype(&::f)>>(#f);
  ZT_LT(cublasLtGetStatusName)
  ZT_LT(cublasLtGetStatusString)
  ZT_LT(cublasLtCreate)
  ZT_LT(cublasLtDestroy)
  ZT_LT(cublasLtMatmulDescCreate)
  ZT_LT(cublasLtMatmulDescDestroy)
  ZT_LT(cublasLtMatmulDescSetAttribute)
  ZT_LT(cublasLtMatrixLayoutCreate)
  ZT_LT(cublasLtMatrixLayoutDestroy)
  ZT_LT(cublasLtMatmulPreferenceCreate)
  ZT_LT(cublasLtMatmulPreferenceDestroy)
  ZT_LT(cublasLtMatmulPreferenceSetAttribute)
  ZT_LT(cublasLtMatmulAlgoGetHeuristic)
  ZT_LT(cublasLtMatmul)
#undef ZT_LT
};
const Lt& lt() {
  static const Lt functions;  // opened once, by the first thread to need it
  return functions;
}

void check_cublas(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(std::string(what) + ": " + lt().cublasLtGetStatusName(st) + ": " + lt().cublasLtGetStatusString(st));
}

// Owns one of cuBLASLt's handles or descriptors.
template <class H, cublasStatus_t (*Lt::*Destroy)(H)>
class Owned {
 public:
  Owned() = default;
  ~Owned() {
    if (h_) (lt().*Destroy)(h_);
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  H get() const { return h_; }
  H* out() { return &h_; }  // for the Create call, on an empty one

 private:
  H h_ = nullptr;
};
using Handle = Owned<cublasLtHandle_t, &Lt::cublasLtDestroy>;
using MatmulDesc = Owned<cublasLtMatmulDesc_t, &Lt::cublasLtMatmulDescDestroy>;
using Layout = Owned<cublasLtMatrixLayout_t, &Lt::cublasLtMatrixLayoutDestroy>;
using Preference = Owned<cublasLtMatmulPreference_t, &Lt::cublasLtMatmulPreferenceDestroy>;

template <class V>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const V& v, const char* what) {
  check_cublas(lt().cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v), what);
}
template <class V>
void set(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const V& v, const char* what) {
  check_cublas(lt().cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof v), what);
}

// The largest power of two up to 256 that divides the address (cuBLASLt's alignment classes).
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 1;
  while (align < 256 && (a & align) == 0) align <<= 1;
  return align;
}

bool has_bias(Epilogue e) { return e == Epilogue::bias || e == Epilogue::gelu_aux_bias; }
bool has_aux(Epilogue e) { return e == Epilogue::gelu_aux || e == Epilogue::gelu_aux_bias; }

cublasLtEpilogue_t lt_epilogue(Epilogue e) {
  switch (e) {
    case Epilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::gelu_aux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case Epilogue::gelu_aux_bias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::none: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Everything the heuristic's choice depends on: shapes, types, transposes, epilogue, and the
// alignment of each pointer (it assumes the alignment it saw; a later call with a less aligned
// pointer gets its own plan).
struct PlanKey {
  bool bf16, trans_a, trans_b;
  Epilogue epilogue;
  int m, n, k, lda, ldb, ldd;
  uint32_t align_a, align_b, align_d, align_bias, align_aux;
  auto operator<=>(const PlanKey&) const = default;

  explicit PlanKey(const Gemm& g)
      : bf16(g.bf16), trans_a(g.trans_a), trans_b(g.trans_b), epilogue(g.epilogue), m(g.m), n(g.n), k(g.k),
        lda(g.lda), ldb(g.ldb), ldd(g.ldd), align_a(alignment(g.a)), align_b(alignment(g.b)),
        align_d(alignment(g.d)), align_bias(has_bias(g.epilogue) ? alignment(g.bias) : 0),
        align_aux(has_aux(g.epilogue) ? alignment(g.aux) : 0) {}

  std::string str() const {
    return std::string(bf16 ? "bf16" : "f32") + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
           " k=" + std::to_string(k) + (trans_a ? " A^T" : " A") + (trans_b ? " B^T" : " B") +
           " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) + " ldd=" + std::to_string(ldd) +
           " epilogue=" + std::to_string(static_cast<int>(epilogue));
  }
};

struct Plan {
  MatmulDesc desc;
  Layout a, b, d;  // C is D
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // whether the heuristic had an algorithm
};

void make_layout(Layout& l, bool bf16, int rows, int cols, int ld) {
  check_cublas(lt().cublasLtMatrixLayoutCreate(l.out(), bf16 ? CUDA_R_16BF : CUDA_R_32F, static_cast<uint64_t>(rows),
                                          static_cast<uint64_t>(cols), ld),
               "cublasLtMatrixLayoutCreate");
}

// Sets the pointers the epilogue reads or writes; they change from call to call.
void set_pointers(const Plan& p, const Gemm& g) {
  if (has_bias(g.epilogue)) set(p.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias, "cublasLtMatmulDescSetAttribute (bias)");
  if (has_aux(g.epilogue)) set(p.desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux, "cublasLtMatmulDescSetAttribute (aux)");
}

std::unique_ptr<Plan> make_plan(cublasLtHandle_t h, const PlanKey& key, const Gemm& g) {
  auto p = std::make_unique<Plan>();
  check_cublas(lt().cublasLtMatmulDescCreate(p->desc.out(), CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasLtMatmulDesc_t d = p->desc.get();
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(d, CUBLASLT_MATMUL_DESC_TRANSA, ta, "cublasLtMatmulDescSetAttribute (transa)");
  set(d, CUBLASLT_MATMUL_DESC_TRANSB, tb, "cublasLtMatmulDescSetAttribute (transb)");
  set(d, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(g.epilogue), "cublasLtMatmulDescSetAttribute (epilogue)");
  if (has_aux(g.epilogue))
    set(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t{g.ldd}, "cublasLtMatmulDescSetAttribute (aux ld)");
  set_pointers(*p, g);  // the heuristic reads their alignment

  make_layout(p->a, g.bf16, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda);
  make_layout(p->b, g.bf16, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb);
  make_layout(p->d, g.bf16, g.m, g.n, g.ldd);

  Preference pref;
  check_cublas(lt().cublasLtMatmulPreferenceCreate(pref.out()), "cublasLtMatmulPreferenceCreate");
  set(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{kWorkspaceBytes},
      "cublasLtMatmulPreferenceSetAttribute (workspace)");
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a, "cublasLtMatmulPreferenceSetAttribute (A)");
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b, "cublasLtMatmulPreferenceSetAttribute (B)");
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d, "cublasLtMatmulPreferenceSetAttribute (C)");
  set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d, "cublasLtMatmulPreferenceSetAttribute (D)");

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  g_heuristic_queries.fetch_add(1, std::memory_order_relaxed);
  const cublasStatus_t st = lt().cublasLtMatmulAlgoGetHeuristic(h, d, p->a.get(), p->b.get(), p->d.get(), p->d.get(),
                                                          pref.get(), 1, &result, &found);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return p;  // no algorithm: remembered, not asked again
  check_cublas(st, "cublasLtMatmulAlgoGetHeuristic");
  p->found = found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  p->algo = result.algo;
  return p;
}

}  // namespace

// One device's handle, workspace and plans. Members are destroyed in reverse: plans before the
// handle they were made with.
struct GemmContext {
  struct Free {
    void operator()(void* p) const { cudaFree(p); }
    void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
  };

  explicit GemmContext(int device) {
    check_cublas(lt().cublasLtCreate(handle.out()), "cublasLtCreate");
    void* w = nullptr;
    check(cudaMalloc(&w, kWorkspaceBytes), "cudaMalloc (cuBLASLt workspace)");
    workspace.reset(w);
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    ready.reset(e);
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  }

  Handle handle;
  std::unique_ptr<void, Free> workspace;
  std::unique_ptr<CUevent_st, Free> ready;  // recorded at the end of the last lease, on its stream
  bool used = false;
  int sms = 0;
  std::mutex m;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
};

namespace {

// The current device's context, created on first use. The contexts live until exit; they were
// created after the CUDA runtime, so they are destroyed before it.
GemmContext& current_context() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  static std::mutex m;
  static std::map<int, std::unique_ptr<GemmContext>> contexts;
  std::lock_guard lock(m);
  auto& c = contexts[device];
  if (!c) c = std::make_unique<GemmContext>(device);
  return *c;
}

}  // namespace

GemmLease::GemmLease(cudaStream_t s) : ctx_(current_context()), lock_(ctx_.m), s_(s) {
  if (ctx_.used) check(cudaStreamWaitEvent(s, ctx_.ready.get(), 0), "cudaStreamWaitEvent (cuBLASLt workspace)");
}

GemmLease::~GemmLease() {
  if (cudaEventRecord(ctx_.ready.get(), s_) == cudaSuccess) ctx_.used = true;
  else cudaGetLastError();  // a broken context; the next op reports it
}

void GemmLease::run(const Gemm& g) {
  if (!try_run(g)) throw CudaError("cublasLtMatmulAlgoGetHeuristic: no algorithm for " + PlanKey(g).str());
}

bool GemmLease::try_run(const Gemm& g) {
  const PlanKey key(g);
  auto& plan = ctx_.plans[key];
  if (!plan) plan = make_plan(ctx_.handle.get(), key, g);
  if (!plan->found) return false;
  set_pointers(*plan, g);
  const float alpha = 1.0f, beta = g.beta;
  check_cublas(lt().cublasLtMatmul(ctx_.handle.get(), plan->desc.get(), &alpha, g.a, plan->a.get(), g.b, plan->b.get(),
                              &beta, g.d, plan->d.get(), g.d, plan->d.get(), &plan->algo, ctx_.workspace.get(),
                              kWorkspaceBytes, s_),
               "cublasLtMatmul");
  return true;
}

void* GemmLease::workspace() const { return ctx_.workspace.get(); }
size_t GemmLease::workspace_bytes() const { return kWorkspaceBytes; }
int GemmLease::sm_count() const { return ctx_.sms; }

uint64_t gemm_heuristic_queries() { return g_heuristic_queries.load(std::memory_order_relaxed); }

}  // namespace zt::cuda
