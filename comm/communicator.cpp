#include "comm/communicator.hpp"

namespace zt {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
  }
  return "?";
}

namespace {
// t itself where the communicator's buffers live, else a copy there (its contents copied when
// `with_data`).
Tensor in_memory(const Communicator& c, const Tensor& t, bool with_data) {
  if (with_data || t.device() == c.memory().device()) return t.on(c.memory(), MemCategory::communication);
  return Tensor::empty(t.shape(), t.dtype(), MemCategory::communication, c.memory());
}
// Copies a result back from its copy in the communicator's memory (nothing where it is t itself).
void back(const Tensor& t, const Tensor& there) {
  if (!there.same_storage(t)) t.copy_from(there);
}
}  // namespace

WorkPtr Communicator::all_gather_async(const Tensor& in, const Tensor& out) {
  WorkPtr w = start_all_gather(in, out);  // after the backend's checks: a refused call sent nothing
  count_sent(static_cast<uint64_t>(size() - 1) * in.nbytes());
  return w;
}

WorkPtr Communicator::reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) {
  WorkPtr w = start_reduce_scatter(in, out, op);
  count_sent(static_cast<uint64_t>(size() - 1) * out.nbytes());
  return w;
}

WorkPtr Communicator::all_reduce_async(const Tensor& in, const Tensor& out, ReduceOp op) {
  WorkPtr w = start_all_reduce(in, out, op);
  const auto n = static_cast<uint64_t>(size());
  count_sent(2 * (n - 1) * in.nbytes() / n);
  return w;
}

WorkPtr Communicator::broadcast_async(const Tensor& buf, int root) {
  WorkPtr w = start_broadcast(buf, root);
  if (size() > 1) count_sent(buf.nbytes());
  return w;
}

void Communicator::all_gather(const Tensor& in, const Tensor& out) {
  const Tensor i = in_memory(*this, in, true), o = in_memory(*this, out, false);
  all_gather_async(i, o)->wait();
  back(out, o);
}

void Communicator::all_reduce(const Tensor& in, const Tensor& out, ReduceOp op) {
  const Tensor i = in_memory(*this, in, true);
  const Tensor o = in.same_storage(out) && in.offset() == out.offset() ? i : in_memory(*this, out, false);
  all_reduce_async(i, o, op)->wait();
  back(out, o);
}

void Communicator::broadcast(const Tensor& buf, int root) {
  const Tensor b = in_memory(*this, buf, true);
  broadcast_async(b, root)->wait();
  back(buf, b);
}

float Communicator::all_reduce_value(float v, ReduceOp op) {
  Tensor host = Tensor::empty({1}, DType::f32, MemCategory::communication);
  host.data<float>()[0] = v;
  all_reduce(host, op);
  return host.data<float>()[0];
}

void Communicator::check_gather(const char* op, const Tensor& small, const Tensor& large) const {
  if (!small.defined() || !large.defined()) throw std::invalid_argument(std::string(op) + ": undefined buffer");
  if (small.dtype() != large.dtype())
    throw std::invalid_argument(std::string(op) + ": buffers of dtypes " + std::string(dtype_name(small.dtype())) +
                                " and " + std::string(dtype_name(large.dtype())));
  if (large.numel() != small.numel() * size())
    throw std::invalid_argument(std::string(op) + ": the large buffer must hold " + std::to_string(size()) + " x " +
                                std::to_string(small.numel()) + " elements, not " + std::to_string(large.numel()));
}

void Communicator::check_same(const char* op, const Tensor& in, const Tensor& out) const {
  if (!in.defined() || !out.defined()) throw std::invalid_argument(std::string(op) + ": undefined buffer");
  if (in.dtype() != out.dtype() || in.numel() != out.numel())
    throw std::invalid_argument(std::string(op) + ": input " + shape_str(in.shape()) + " " +
                                std::string(dtype_name(in.dtype())) + " and output " + shape_str(out.shape()) + " " +
                                std::string(dtype_name(out.dtype())) + " differ");
}

void Communicator::check_reducible(const char* op, DType t, ReduceOp r) {
  if (t == DType::u16 || (t == DType::i32 && r == ReduceOp::avg))
    throw std::invalid_argument(std::string(op) + ": no " + std::string(reduce_op_name(r)) + " reduction of " +
                                std::string(dtype_name(t)));
}

}  // namespace zt
