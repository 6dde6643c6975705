// SGEMM on this machine through every CPU GEMM library at hand, in one process: Eigen's own
// product, and each BLAS named on the command line (OpenBLAS, BLIS: loaded with dlopen, each with
// its own symbols, so one run compares them all whatever -Dblas the build chose). Shapes: the
// square n^3 and the GEMMs of a GPT-2 training step (forward, and both backward products).
// Prints one JSON line per library and shape; bench/sgemm_bench.sh adds MKL through PyTorch.
//   sgemm --threads 2 --square 2048 --rows 1024 --channels 768 --vocab 50304
//         --lib openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 --lib blis=...
#include <dlfcn.h>
#include <omp.h>

#include <Eigen/Core>
#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMat>;
// CBLAS's enums as their values: the ABI every CBLAS shares (row-major 101, no-trans 111, trans 112).
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
using Gemm = std::function<void(bool, bool, int, int, int, const float*, const float*, float*)>;

struct Shape {
  const char* name;
  bool ta, tb;
  int M, N, K;
};

// Best of `reps` after one warm-up call, in GFLOP/s.
double time_gemm(const Gemm& gemm, const Shape& s, int reps) {
  RowMat a = RowMat::Random(s.ta ? s.K : s.M, s.ta ? s.M : s.K), b = RowMat::Random(s.tb ? s.N : s.K, s.tb ? s.K : s.N);
  RowMat c = RowMat::Zero(s.M, s.N);
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    gemm(s.ta, s.tb, s.M, s.N, s.K, a.data(), b.data(), c.data());
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) best = std::min(best, dt);
  }
  return 2.0 * s.M * s.N * s.K / best / 1e9;
}

void eigen_gemm(bool ta, bool tb, int M, int N, int K, const float* A, const float* B, float* C) {
  Eigen::Map<const RowMat> a(A, ta ? K : M, ta ? M : K), b(B, tb ? N : K, tb ? K : N);
  Map c(C, M, N);
  if (ta && tb) c.noalias() = a.transpose() * b.transpose();
  else if (ta) c.noalias() = a.transpose() * b;
  else if (tb) c.noalias() = a * b.transpose();
  else c.noalias() = a * b;
}

// A BLAS loaded on its own (RTLD_DEEPBIND: its calls to itself stay inside it), its thread count
// set through whichever setter it exports.
Gemm load_blas(const std::string& path, int threads) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) throw std::runtime_error("cannot load " + path + ": " + dlerror());
  auto sgemm = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
  if (!sgemm) throw std::runtime_error(path + " has no cblas_sgemm");
  if (auto set = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"))) set(threads);
  else if (auto set_blis = reinterpret_cast<void (*)(long)>(dlsym(h, "bli_thread_set_num_threads"))) set_blis(threads);
  return [sgemm](bool ta, bool tb, int M, int N, int K, const float* A, const float* B, float* C) {
    sgemm(101, ta ? 112 : 111, tb ? 112 : 111, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C, N);
  };
}

}  // namespace

int main(int argc, char** argv) try {
  int threads = 2, square = 2048, rows = 1024, ch = 768, vocab = 50304, reps = 3;
  std::vector<std::pair<std::string, std::string>> libs;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--threads") threads = std::stoi(v);
    else if (k == "--square") square = std::stoi(v);
    else if (k == "--rows") rows = std::stoi(v);
    else if (k == "--channels") ch = std::stoi(v);
    else if (k == "--vocab") vocab = std::stoi(v);
    else if (k == "--reps") reps = std::stoi(v);
    else if (k == "--lib" && v.find('=') != std::string::npos) libs.emplace_back(v.substr(0, v.find('=')), v.substr(v.find('=') + 1));
    else throw std::runtime_error("unknown argument " + k + " " + v + " (see the comment at the top of bench/sgemm.cpp)");
  }
  omp_set_num_threads(threads);
  Eigen::setNbThreads(threads);
  // A linear layer (N rows, in → out): forward y = x·Wᵀ, backward dx = dy·W and dW = dyᵀ·x.
  std::vector<Shape> shapes = {{"square", false, false, square, square, square}};
  const std::pair<const char*, std::pair<int, int>> layers[] = {
      {"qkv", {ch, 3 * ch}}, {"attproj", {ch, ch}}, {"fc", {ch, 4 * ch}}, {"fcproj", {4 * ch, ch}}, {"lm_head", {ch, vocab}}};
  std::vector<std::string> names;  // Shape keeps a pointer
  names.reserve(3 * std::size(layers));
  for (const auto& [name, io] : layers) {
    const auto [in, out] = io;
    shapes.push_back({names.emplace_back(std::string(name) + ".fwd").c_str(), false, true, rows, out, in});
    shapes.push_back({names.emplace_back(std::string(name) + ".dx").c_str(), false, false, rows, in, out});
    shapes.push_back({names.emplace_back(std::string(name) + ".dw").c_str(), true, false, out, in, rows});
  }
  std::vector<std::pair<std::string, Gemm>> gemms = {{"eigen", eigen_gemm}};
  for (const auto& [name, path] : libs) gemms.emplace_back(name, load_blas(path, threads));
  for (const auto& [lib, gemm] : gemms)
    for (const Shape& s : shapes)
      std::printf("{\"lib\":\"%s\",\"shape\":\"%s\",\"M\":%d,\"N\":%d,\"K\":%d,\"threads\":%d,\"gflops\":%.1f}\n", lib.c_str(),
                  s.name, s.M, s.N, s.K, threads, time_gemm(gemm, s, reps));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "sgemm: %s\n", e.what());
  return 1;
}
