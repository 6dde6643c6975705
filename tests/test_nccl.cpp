// NcclCommunicator on device buffers: every collective x f32/bf16 x in/out of place x a few sizes,
// outputs poisoned (0xFF: NaN in both types) first and results compared bit for bit, then the
// argument checks, outstanding operations completing in any order, barrier and split.
// Exits 77 (skipped) without a CUDA device. Written for one rank (the Self world); under mpirun
// the expected values follow the rank count, and avg is compared exactly only for a power of two.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/nccl_communicator.hpp"
#include "comm/process_group.hpp"
#include "tensor/cuda_allocator.hpp"

namespace {

using zt::DType;
using zt::ReduceOp;
using zt::Tensor;

int g_checks = 0;
int g_failures = 0;
std::string g_prefix;

void check(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    std::fprintf(stderr, "%sFAIL: %s\n", g_prefix.c_str(), what.c_str());
  }
}

void cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Rank r's element i: small integers (and their sums over a few ranks) are exact in bf16.
float value(int r, int64_t i) { return static_cast<float>((i * 7 + r * 3) % 61 - 30); }

// Host images of a device tensor, as the dtype's bits.
std::vector<uint16_t> encode_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = zt::f32_to_bf16(v[i]);
  return h;
}

void upload(const Tensor& t, const std::vector<float>& v) {
  if (v.empty()) return;
  if (t.dtype() == DType::f32) {
    cuda(cudaMemcpy(t.device_ptr(), v.data(), t.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  } else {
    const auto h = encode_bf16(v);
    cuda(cudaMemcpy(t.device_ptr(), h.data(), t.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
}

std::vector<float> download(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (v.empty()) return v;
  if (t.dtype() == DType::f32) {
    cuda(cudaMemcpy(v.data(), t.device_ptr(), t.nbytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  } else {
    std::vector<uint16_t> h(v.size());
    cuda(cudaMemcpy(h.data(), t.device_ptr(), t.nbytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (size_t i = 0; i < v.size(); ++i) v[i] = zt::bf16_to_f32(h[i]);
  }
  return v;
}

void poison(const Tensor& t) {
  if (t.nbytes()) cuda(cudaMemset(t.device_ptr(), 0xFF, t.nbytes()), "cudaMemset");
}

// Bit for bit after rounding `want` to the dtype; `tol` (relative) only where the dtype's
// arithmetic cannot be exact.
void expect(const std::string& what, const Tensor& t, const std::vector<float>& want, double tol = 0) {
  const std::vector<float> got = download(t);
  int64_t wrong = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const float w = t.dtype() == DType::bf16 ? zt::bf16_to_f32(zt::f32_to_bf16(want[i])) : want[i];
    const bool ok = tol == 0 ? std::memcmp(&got[i], &w, sizeof w) == 0
                             : std::fabs(static_cast<double>(got[i]) - w) <= tol * std::fabs(static_cast<double>(w));
    if (!ok && wrong++ == 0) first = static_cast<int64_t>(i);
  }
  check(wrong == 0, what + ": " + std::to_string(wrong) + " of " + std::to_string(got.size()) + " wrong" +
                        (first >= 0 ? ", first at " + std::to_string(first) + ": got " + std::to_string(got[static_cast<size_t>(first)]) +
                                          ", want " + std::to_string(want[static_cast<size_t>(first)])
                                    : std::string()));
}

template <class F> void expect_throw(const std::string& what, F&& f) {
  bool thrown = false;
  try {
    f();
  } catch (const std::invalid_argument&) {
    thrown = true;
  }
  check(thrown, what + ": no std::invalid_argument");
}

float reduce(ReduceOp op, int n, const std::function<float(int)>& at) {
  float acc = at(0);
  for (int r = 1; r < n; ++r) acc = op == ReduceOp::max ? std::max(acc, at(r)) : acc + at(r);
  return op == ReduceOp::avg ? acc / static_cast<float>(n) : acc;
}

struct Case {
  zt::Communicator& comm;
  zt::Allocator& dev;
  DType dtype;
  int64_t count;
  bool in_place;

  int n() const { return comm.size(); }
  int rank() const { return comm.rank(); }
  std::string name(const char* op) const {
    return std::string(op) + " " + std::string(zt::dtype_name(dtype)) + " x" + std::to_string(count) +
           (in_place ? " in place" : " out of place");
  }
  Tensor make(int64_t elems) const { return Tensor::empty({elems}, dtype, zt::MemCategory::communication, dev); }
  std::vector<float> rank_values(int r, int64_t elems) const {
    std::vector<float> v(static_cast<size_t>(elems));
    for (int64_t i = 0; i < elems; ++i) v[static_cast<size_t>(i)] = value(r, i);
    return v;
  }
  // avg divides by n in the dtype: exact only when n is a power of two.
  double avg_tol(ReduceOp op) const {
    return op == ReduceOp::avg && (n() & (n() - 1)) != 0 ? (dtype == DType::bf16 ? 1.0 / 64 : 1e-6) : 0;
  }

  void all_gather() const {
    const int64_t c = count;
    Tensor out = make(c * n());
    poison(out);
    Tensor in = in_place ? out.view(rank() * c, {c}) : make(c);
    const auto mine = rank_values(rank(), c);
    upload(in, mine);
    comm.all_gather(in, out);
    std::vector<float> want;
    for (int j = 0; j < n(); ++j) {
      const auto v = rank_values(j, c);
      want.insert(want.end(), v.begin(), v.end());
    }
    expect(name("all_gather"), out, want);
    if (!in_place) expect(name("all_gather") + " input", in, mine);
  }

  void reduce_scatter(ReduceOp op) const {
    const int64_t c = count;
    Tensor in = make(c * n());
    const auto mine = rank_values(rank(), c * n());
    upload(in, mine);
    Tensor out = in_place ? in.view(rank() * c, {c}) : make(c);
    if (!in_place) poison(out);
    comm.reduce_scatter(in, out, op);
    std::vector<float> want(static_cast<size_t>(c));
    for (int64_t i = 0; i < c; ++i)
      want[static_cast<size_t>(i)] = reduce(op, n(), [&](int r) { return value(r, rank() * c + i); });
    const std::string what = name("reduce_scatter") + " " + std::string(zt::reduce_op_name(op));
    expect(what, out, want, avg_tol(op));
    if (!in_place) expect(what + " input", in, mine);
  }

  void all_reduce(ReduceOp op) const {
    Tensor in = make(count);
    const auto mine = rank_values(rank(), count);
    upload(in, mine);
    Tensor out = in_place ? in : make(count);
    if (!in_place) poison(out);
    comm.all_reduce(in, out, op);
    std::vector<float> want(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(i)] = reduce(op, n(), [&](int r) { return value(r, i); });
    const std::string what = name("all_reduce") + " " + std::string(zt::reduce_op_name(op));
    expect(what, out, want, avg_tol(op));
    if (!in_place) expect(what + " input", in, mine);
  }

  void broadcast(int root) const {
    Tensor buf = make(count);
    if (rank() == root)
      upload(buf, rank_values(root, count));
    else
      poison(buf);
    comm.broadcast(buf, root);
    expect(name("broadcast") + " from " + std::to_string(root), buf, rank_values(root, count));
  }
};

void argument_checks(zt::Communicator& comm, zt::Allocator& dev) {
  const int n = comm.size();
  const Tensor host = Tensor::empty({4 * n}, DType::f32);
  const Tensor d4 = Tensor::empty({4}, DType::f32, zt::MemCategory::communication, dev);
  const Tensor dn = Tensor::empty({4 * n}, DType::f32, zt::MemCategory::communication, dev);
  expect_throw("all_gather of a host tensor", [&] { comm.all_gather(host.view(0, {4}), host); });
  expect_throw("all_reduce of a host tensor", [&] { comm.all_reduce(host, ReduceOp::sum); });
  expect_throw("broadcast of a host tensor", [&] { comm.broadcast(host, 0); });
  expect_throw("all_gather of mismatched sizes", [&] { comm.all_gather(d4, d4.view(0, {3})); });
  expect_throw("reduce_scatter of mismatched dtypes", [&] {
    comm.reduce_scatter(dn, Tensor::empty({4}, DType::bf16, zt::MemCategory::communication, dev), ReduceOp::sum);
  });
  const Tensor u = Tensor::empty({4}, DType::u16, zt::MemCategory::communication, dev);
  expect_throw("all_reduce of u16", [&] { comm.all_reduce(u, ReduceOp::sum); });
  const Tensor i = Tensor::empty({4}, DType::i32, zt::MemCategory::communication, dev);
  expect_throw("all_reduce avg of i32", [&] { comm.all_reduce(i, ReduceOp::avg); });
  expect_throw("broadcast from a root outside", [&] { comm.broadcast(d4, n); });

  // u16 moves as bytes.
  const Tensor ug = Tensor::empty({4 * n}, DType::u16, zt::MemCategory::communication, dev);
  poison(ug);
  const std::vector<uint16_t> mine = {1, 2, 3, static_cast<uint16_t>(comm.rank())};
  cuda(cudaMemcpy(u.device_ptr(), mine.data(), u.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy");
  comm.all_gather(u, ug);
  std::vector<uint16_t> got(static_cast<size_t>(4 * n));
  cuda(cudaMemcpy(got.data(), ug.device_ptr(), ug.nbytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  bool ok = true;
  for (int r = 0; r < n; ++r)
    ok = ok && got[static_cast<size_t>(4 * r)] == 1 && got[static_cast<size_t>(4 * r + 3)] == static_cast<uint16_t>(r);
  check(ok, "all_gather of u16");
}

// Several outstanding operations, waited for in the reverse of their issue order.
void outstanding(zt::Communicator& comm, zt::Allocator& dev) {
  constexpr int kOps = 8;
  constexpr int64_t kCount = 1 << 16;
  const int n = comm.size();
  std::vector<Tensor> ins, outs;
  std::vector<zt::WorkPtr> works;
  for (int k = 0; k < kOps; ++k) {
    ins.push_back(Tensor::empty({kCount}, DType::f32, zt::MemCategory::communication, dev));
    outs.push_back(Tensor::empty({kCount * n}, DType::f32, zt::MemCategory::communication, dev));
    std::vector<float> v(kCount);
    for (int64_t i = 0; i < kCount; ++i) v[static_cast<size_t>(i)] = value(comm.rank(), i + k);
    upload(ins.back(), v);
    poison(outs.back());
    works.push_back(comm.all_gather_async(ins.back(), outs.back()));
  }
  for (int k = kOps - 1; k >= 0; --k) works[static_cast<size_t>(k)]->wait();
  for (int k = 0; k < kOps; ++k) {
    check(works[static_cast<size_t>(k)]->test(), "test() after wait()");
    std::vector<float> want;
    for (int j = 0; j < n; ++j)
      for (int64_t i = 0; i < kCount; ++i) want.push_back(value(j, i + k));
    expect("outstanding all_gather " + std::to_string(k), outs[static_cast<size_t>(k)], want);
  }
}

void split_check(zt::Communicator& comm, zt::Allocator& dev) {
  // Even and odd ranks, each ordered by descending rank.
  const int color = comm.rank() % 2;
  auto sub = comm.split(color, -comm.rank());
  int members = 0, position = 0;
  for (int r = 0; r < comm.size(); ++r)
    if (r % 2 == color) {
      ++members;
      if (r > comm.rank()) ++position;
    }
  check(sub->backend() == "nccl", "split: backend");
  check(sub->size() == members, "split: size " + std::to_string(sub->size()) + ", want " + std::to_string(members));
  check(sub->rank() == position, "split: rank " + std::to_string(sub->rank()) + ", want " + std::to_string(position));
  check(sub->local_size() >= 1 && sub->local_rank() < sub->local_size(), "split: local rank within local size");
  const Tensor t = Tensor::empty({3}, DType::f32, zt::MemCategory::communication, dev);
  upload(t, {1.0f, static_cast<float>(comm.rank()), 2.0f});
  sub->all_reduce(t, ReduceOp::sum);
  float rank_sum = 0;
  for (int r = 0; r < comm.size(); ++r)
    if (r % 2 == color) rank_sum += static_cast<float>(r);
  expect("split: all_reduce on the new communicator", t,
         {static_cast<float>(members), rank_sum, 2.0f * static_cast<float>(members)});
  sub->barrier();
}

}  // namespace

int main(int argc, char** argv) {
  if (!zt::cuda_device_available()) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  std::unique_ptr<zt::ProcessGroup> pg;
  try {
    pg = zt::ProcessGroup::start(&argc, &argv);
    g_prefix = pg->prefix();
    auto comm = zt::make_nccl_communicator(pg->world());
    comm->set_timeout(std::chrono::seconds(60));
    int device = 0;
    cuda(cudaGetDevice(&device), "cudaGetDevice");
    zt::Allocator& dev = zt::cuda_allocator(device);
    check(comm->backend() == "nccl" && comm->rank() == pg->rank() && comm->size() == pg->size(), "rank and size");

    for (DType dtype : {DType::f32, DType::bf16})
      for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{33}, int64_t{4096}, int64_t{(1 << 18) + 5}})
        for (bool in_place : {false, true}) {
          const Case c{*comm, dev, dtype, count, in_place};
          c.all_gather();
          for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
            c.reduce_scatter(op);
            c.all_reduce(op);
          }
          if (in_place) {  // broadcast has one buffer
            c.broadcast(0);
            c.broadcast(comm->size() - 1);
          }
        }
    argument_checks(*comm, dev);
    outstanding(*comm, dev);
    comm->barrier();
    split_check(*comm, dev);
    comm->barrier();
    cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const auto mem = dev.accounting().snapshot();
    comm.reset();
    check(dev.accounting().snapshot()[zt::MemCategory::communication] < mem[zt::MemCategory::communication],
          "the communicator's device buffers are freed with it");
  } catch (const std::exception& e) {
    if (pg) pg->fail(std::string("test_nccl: ") + e.what());
    std::fprintf(stderr, "test_nccl: %s\n", e.what());
    return 1;
  }
  std::printf("%snccl: %d checks, %d failed\n", g_prefix.c_str(), g_checks, g_failures);
  return g_failures ? 1 : 0;
}
