// The backend-op sweep, after ggml's test-backend-ops: one table (tests/backend_ops_rows.cpp)
// with a row per op of zt::Backend, and two programs that walk it, rows x dtypes x shapes:
// tests/test_backend_ops.cpp checks the CPU backend against each row's float64 reference and
// its gradients against central finite differences of that reference; tests/cuda/
// test_backend_ops.cpp checks the CUDA backend against the CPU backend on the same rows.
//
// A row is a name, its shapes (named sizes, awkward on purpose: 1, primes, T = 1, several heads,
// B*T a multiple of nothing), the dtypes it takes, and a maker that turns (shape, dtypes, random
// generator) into a Problem: the tensors of one call with their values, the float64 reference
// of the outputs (plain loops, tests/reference.hpp), and how to call the backend's forward and
// backward on them. A new op joins by adding a row; the programs need no change.
#pragma once

#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/backend.hpp"
#include "tensor/tensor.hpp"

namespace zt::sweep {

using DVec = std::vector<double>;

// A row's sizes by name, printed in failure messages as "B=2 T=7 C=13".
class Dims {
 public:
  Dims(std::initializer_list<std::pair<const char*, int>> d) : d_(d) {}
  int operator[](std::string_view name) const;  // throws std::out_of_range for a name it lacks
  std::string str() const;

 private:
  std::vector<std::pair<const char*, int>> d_;
};

// The dtypes of one case: dt, the op's own (activations and parameters; cast's input; adamw's
// gradients), and to, a second one where the op has it (cast's output; the low-precision copy
// adamw writes, f32 meaning none), else dt.
struct Types {
  DType dt = DType::f32, to = DType::f32;
  std::string str() const;  // "bf16", or "f32->f16"
};

// An input of the call. Values are rounded to the dtype before any run (round_values), so every
// backend and the reference see the same numbers. A `grad` input gets a gradient tensor in the
// backward, starting from g0 (prepare fills it) since backwards accumulate; exact_zeros: where
// the reference gradient is exactly zero (an input the loss does not depend on), the backend's
// must be exactly zero too: untouched, not merely small.
struct In {
  std::string name;
  Shape shape;
  DType dtype;
  DVec v;
  bool grad = false;
  bool exact_zeros = false;
  DVec g0 = {};
};

// An output of the call. dout seeds the backward (the loss is the sum over outputs of
// dot(out, dout)); empty: none (saved statistics). alias >= 0: the op writes input `alias` in
// place (accumulate, adamw). host: the op's return value, one element (sum_squares,
// any_nonfinite). exact: every element must match exactly; exact_zeros: as for In.
struct Out {
  std::string name;
  Shape shape;
  DType dtype;
  DVec dout = {};
  int alias = -1;
  bool host = false;
  bool exact = false;
  bool exact_zeros = false;
};

// The backend tensors of one call, in the Problem's order. grad[i] is undefined for an input
// without a gradient or whose gradient the caller does not want (the backward must skip it).
struct Call {
  std::vector<Tensor> in, out, dout, grad;
  Tensor saved;     // what a forward returns for its backward (attention)
  double host = 0;  // an op's return value
};

struct Problem {
  std::vector<In> in;
  std::vector<Out> out;
  // The outputs in float64 from the inputs' values (in the order of `in` and `out`).
  std::function<std::vector<DVec>(const std::vector<DVec>& in)> reference;
  std::function<void(const Backend&, Call&)> forward;
  std::function<void(const Backend&, Call&)> backward;  // empty: the op has none
  // The backward writes its gradients over the inputs (cross-entropy's d(logits) over the
  // logits): its gradient tensors start as the inputs' values and nothing is accumulated.
  bool overwrites = false;
};

struct OpRow {
  const char* name;
  std::vector<Dims> shapes;
  std::function<Problem(const Dims&, const Types&, std::mt19937&)> make;
  // The dtypes a backend runs this op in. Empty: {dt, dt} for every dtype the backend computes
  // in, and the others must be refused (compute_types, refused_types).
  std::function<std::vector<Types>(const Backend&)> types = {};
  // Whether a backend takes this shape and these dtypes (the CUDA kernels' documented limits);
  // where not, it must refuse them with std::invalid_argument. Empty: all.
  std::function<bool(const Backend&, const Dims&, const Types&)> takes = {};
  // Whether every backend takes every dtype of this op (cast): the CUDA sweep's CPU twin then
  // runs the same dtypes instead of f32.
  bool any_dtype = false;
};

// The table, in the order of kernels/backend.hpp.
const std::vector<OpRow>& op_rows();
// The attention row's options for its shape: the scale from qpas, the window (tests/backend_ops_rows.cpp).
AttentionOptions attention_options(const Dims& d);
std::vector<Types> compute_types(const OpRow& row, const Backend& be);
std::vector<Types> refused_types(const OpRow& row, const Backend& be);
// "layernorm bf16 B=2 T=7 C=13", for failure messages.
std::string describe(const OpRow& row, const Types& t, const Dims& d);

// Fills g0 of every gradient input (unit normals) unless the backward overwrites, then rounds
// the values, g0 and dout to their tensors' dtypes.
void prepare(Problem& p, std::mt19937& gen);
// p with every tensor of dtype `from` given dtype `to` (values unchanged): the CPU twin of a
// bf16 case, whose rounded values f32 holds exactly.
Problem retyped(Problem p, DType from, DType to);

// What a run gives back: the outputs, and each gradient (empty where undefined).
struct Result {
  std::vector<DVec> out, grad;
};
// Runs p on `be` with tensors from `alloc` (be's device): inputs copied there, outputs poisoned
// with NaN first so that an unwritten element shows; then, if p has a backward and `backward`,
// the backward with a gradient for each gradient input i where want[i] (all when want is empty).
Result run(const Backend& be, Allocator& alloc, const Problem& p, bool backward = true,
           const std::vector<bool>& want = {});

// The relative error bound of a result in dtype t (see the note in backend_ops.cpp).
// The sweep over `be`: every row's cases in the dtypes `be` computes in, each made and prepared;
// shapes the row says `be` refuses must throw std::invalid_argument, the others go to `check`
// (with INFO naming the case); every row must run at least one case.
void for_each_case(const Backend& be, Allocator& alloc, std::mt19937& gen,
                   const std::function<void(const OpRow& row, const Types& ty, const Problem& p, const std::string& what)>& check);
// Every row's cases in the dtypes `be` does not compute in must throw std::invalid_argument.
void check_refused_dtypes(const Backend& be, Allocator& alloc, std::mt19937& gen);

double tolerance(DType t);
inline constexpr double kHostTol = 1e-10;

// CHECKs got against want: ||got - want|| / ||want|| <= tol (||got - want|| where want is all
// zero), every element finite where want is, and with `exact` every element equal, bit for bit
// of the double; with `exact_zeros` exactly zero wherever want is. `what` names op, dtype, shape
// and tensor.
void expect_close(const DVec& got, const DVec& want, double tol, bool exact, bool exact_zeros,
                  const std::string& what);

}  // namespace zt::sweep
