// The sweep's machinery (tests/backend_ops.hpp): running a Problem on a backend, and comparing.
#include "tests/backend_ops.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "tensor/dtype.hpp"

namespace zt::sweep {

int Dims::operator[](std::string_view name) const {
  for (const auto& [k, v] : d_)
    if (name == k) return v;
  throw std::out_of_range("no size " + std::string(name));
}

std::string Dims::str() const {
  std::string s;
  for (const auto& [k, v] : d_) {
    if (!s.empty()) s += ' ';
    s.append(k).append("=").append(std::to_string(v));
  }
  return s;
}

std::string Types::str() const {
  return dt == to ? std::string(dtype_name(dt)) : std::string(dtype_name(dt)) + "->" + std::string(dtype_name(to));
}

namespace {
constexpr DType kFloats[] = {DType::f32, DType::bf16, DType::f16};
}  // namespace

std::vector<Types> compute_types(const OpRow& row, const Backend& be) {
  if (row.types) return row.types(be);
  std::vector<Types> ts;
  for (DType t : kFloats)
    if (be.computes_in(t)) ts.push_back({t, t});
  return ts;
}

std::vector<Types> refused_types(const OpRow& row, const Backend& be) {
  std::vector<Types> ts;
  if (!row.types)
    for (DType t : kFloats)
      if (!be.computes_in(t)) ts.push_back({t, t});
  return ts;
}

std::string describe(const OpRow& row, const Types& t, const Dims& d) {
  return std::string(row.name) + " " + t.str() + " " + d.str();
}

namespace {

// x as a tensor of dtype t holds it (integers as they are).
double stored(DType t, double x) {
  switch (t) {
    case DType::f32: return static_cast<float>(x);
    case DType::bf16: return bf16_to_f32(f32_to_bf16(static_cast<float>(x)));
    case DType::f16: return f16_to_f32(f32_to_f16(static_cast<float>(x)));
    case DType::i32: return static_cast<int32_t>(x);
    case DType::u16: return static_cast<uint16_t>(x);
  }
  return x;
}

void round_all(DVec& v, DType t) {
  for (double& x : v) x = stored(t, x);
}

// A tensor of `shape` and dtype t in alloc's memory, holding v (already rounded to t).
Tensor upload(Allocator& alloc, const Shape& shape, DType t, const DVec& v) {
  Tensor h = Tensor::empty(shape, t);
  REQUIRE(v.size() == count_of(h));
  for (size_t i = 0; i < v.size(); ++i) {
    const auto f = static_cast<float>(v[i]);
    switch (t) {
      case DType::f32: h.data<float>()[i] = f; break;
      case DType::bf16: h.data<uint16_t>()[i] = f32_to_bf16(f); break;
      case DType::f16: h.data<uint16_t>()[i] = f32_to_f16(f); break;
      case DType::i32: h.data<int32_t>()[i] = static_cast<int32_t>(v[i]); break;
      case DType::u16: h.data<uint16_t>()[i] = static_cast<uint16_t>(v[i]); break;
    }
  }
  return alloc.device() == Device::cpu ? h : h.to(alloc, MemCategory::other);
}

DVec download(const Tensor& t) {
  const Tensor h = t.on(cpu_allocator(), MemCategory::other);
  DVec v(count_of(h));
  for (size_t i = 0; i < v.size(); ++i) switch (h.dtype()) {
      case DType::f32: v[i] = h.data<float>()[i]; break;
      case DType::bf16: v[i] = bf16_to_f32(h.data<uint16_t>()[i]); break;
      case DType::f16: v[i] = f16_to_f32(h.data<uint16_t>()[i]); break;
      case DType::i32: v[i] = h.data<int32_t>()[i]; break;
      case DType::u16: v[i] = h.data<uint16_t>()[i]; break;
    }
  return v;
}

}  // namespace

void prepare(Problem& p, std::mt19937& gen) {
  std::normal_distribution<double> normal;
  for (In& in : p.in) {
    if (in.grad && !p.overwrites && in.g0.empty()) {
      in.g0.resize(in.v.size());
      for (double& x : in.g0) x = normal(gen);
    }
    round_all(in.v, in.dtype);
    round_all(in.g0, in.dtype);
  }
  for (Out& out : p.out) round_all(out.dout, out.dtype);
}

Problem retyped(Problem p, DType from, DType to) {
  for (In& in : p.in)
    if (in.dtype == from) in.dtype = to;
  for (Out& out : p.out)
    if (out.dtype == from) out.dtype = to;
  return p;
}

Result run(const Backend& be, Allocator& alloc, const Problem& p, bool backward, const std::vector<bool>& want) {
  Call c;
  for (const In& in : p.in) c.in.push_back(upload(alloc, in.shape, in.dtype, in.v));
  for (const Out& out : p.out) {
    if (out.host) {
      c.out.emplace_back();
    } else if (out.alias >= 0) {
      c.out.push_back(c.in.at(static_cast<size_t>(out.alias)));
    } else {
      c.out.push_back(Tensor::empty(out.shape, out.dtype, MemCategory::other, alloc));
      c.out.back().fill(std::numeric_limits<float>::quiet_NaN());
    }
  }
  p.forward(be, c);
  Result r;
  for (size_t j = 0; j < p.out.size(); ++j) r.out.push_back(p.out[j].host ? DVec{c.host} : download(c.out[j]));
  if (!backward || !p.backward) return r;

  for (const Out& out : p.out)
    c.dout.push_back(out.dout.empty() ? Tensor() : upload(alloc, out.shape, out.dtype, out.dout));
  for (size_t i = 0; i < p.in.size(); ++i) {
    const In& in = p.in[i];
    const bool wanted = in.grad && (want.empty() || want.at(i));
    c.grad.push_back(wanted ? upload(alloc, in.shape, in.dtype, p.overwrites ? in.v : in.g0) : Tensor());
  }
  p.backward(be, c);
  for (const Tensor& g : c.grad) r.grad.push_back(g.defined() ? download(g) : DVec{});
  return r;
}

// [Note: sweep tolerances] Relative errors, ||got - want|| / ||want|| over a whole tensor:
// - f32, 1e-5: 24 bits hold 6e-8; the kernels' sums (up to a few hundred terms here, in
//   Eigen's or the GPU's order) lose more: the CPU's worst forward is 7e-7 (layernorm, C = 200),
//   while a wrong index, a missed term or a missed row moves the error above 1e-3.
// - bf16, 1e-2: 8 bits hold 2^-9 = 2e-3 per stored element, and the CUDA bf16 kernels round
//   intermediates too (attention's P and dS: 2-3e-3 measured, tests/cuda/test_attention.cpp).
// - f16, 1e-3: 11 bits, 2^-12 = 2.4e-4 per element (adamw's low copy, rounded once).
// Gradients against finite differences take kGradTol (tests/test_backend_ops.cpp); host results
// (sum_squares' double) kHostTol: both sides add exact double squares, in other orders.
double tolerance(DType t) {
  switch (t) {
    case DType::bf16: return 1e-2;
    case DType::f16: return 1e-3;
    default: return 1e-5;
  }
}

void expect_close(const DVec& got, const DVec& want, double tol, bool exact, bool exact_zeros,
                  const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  double num = 0, den = 0, worst = -1;
  size_t unequal = 0, not_finite = 0, not_zero = 0, first = SIZE_MAX, at_worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool bad_equal = exact && std::memcmp(&got[i], &want[i], sizeof(double)) != 0;
    const bool bad_finite = std::isfinite(want[i]) && !std::isfinite(got[i]);
    const bool bad_zero = exact_zeros && want[i] == 0.0 && got[i] != 0.0;
    unequal += bad_equal;
    not_finite += bad_finite;
    not_zero += bad_zero;
    if ((bad_equal || bad_finite || bad_zero) && first == SIZE_MAX) first = i;
    if (std::isfinite(want[i]) && std::isfinite(got[i])) {
      const double d = std::fabs(got[i] - want[i]);
      num += d * d;
      den += want[i] * want[i];
      if (d > worst) worst = d, at_worst = i;
    }
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  INFO("relative error " << rel << " (bound " << tol << "); " << not_finite << " not finite, " << unequal
                         << " not exact, " << not_zero << " not exactly zero of " << got.size());
  // The first element that breaks a rule, else the farthest off.
  const size_t i = first != SIZE_MAX ? first : at_worst;
  char element[128] = "";
  if (!got.empty())
    std::snprintf(element, sizeof element, "element %zu: got %.9g, want %.9g", i, got[i], want[i]);
  INFO(element);
  CHECK(not_finite == 0);
  CHECK(unequal == 0);
  CHECK(not_zero == 0);
  CHECK(rel <= tol);
}

void for_each_case(const Backend& be, Allocator& alloc, std::mt19937& gen,
                   const std::function<void(const OpRow& row, const Types& ty, const Problem& p, const std::string& what)>& check) {
  for (const OpRow& row : op_rows()) {
    int cases = 0;
    for (const Types& ty : compute_types(row, be))
      for (const Dims& d : row.shapes) {
        const std::string what = describe(row, ty, d);
        INFO(what);
        Problem p = row.make(d, ty, gen);
        prepare(p, gen);
        if (row.takes && !row.takes(be, d, ty)) {
          CHECK_THROWS_AS(run(be, alloc, p), std::invalid_argument);
          continue;
        }
        check(row, ty, p, what);
        ++cases;
      }
    INFO(row.name);
    CHECK(cases > 0);  // a row that runs nothing checks nothing
  }
}

void check_refused_dtypes(const Backend& be, Allocator& alloc, std::mt19937& gen) {
  for (const OpRow& row : op_rows())
    for (const Types& ty : refused_types(row, be))
      for (const Dims& d : row.shapes) {
        INFO(describe(row, ty, d));
        Problem p = row.make(d, ty, gen);
        prepare(p, gen);
        if (std::none_of(p.in.begin(), p.in.end(), [&](const In& x) { return x.dtype == ty.dt; })) continue;
        CHECK_THROWS_AS(run(be, alloc, p), std::invalid_argument);
      }
}

}  // namespace zt::sweep
