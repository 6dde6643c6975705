#include "tensor/tensor.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace zt {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

void throw_dtype_mismatch(DType have, std::string_view want) {
  throw std::logic_error("tensor of dtype " + std::string(dtype_name(have)) + " accessed as " + std::string(want));
}

Storage::Storage(size_t bytes, MemCategory c, Allocator& a, bool materialize_now)
    : bytes_(bytes), category_(c), allocator_(&a) {
  if (materialize_now) materialize();
}

Storage::~Storage() { release(); }

void Storage::materialize() {
  if (!data_ && bytes_) data_ = allocator_->allocate(bytes_, category_);
}

void Storage::release() {
  if (data_) allocator_->deallocate(data_, bytes_, category_);
  data_ = nullptr;
}

Tensor Tensor::empty(const Shape& shape, DType dt, MemCategory c, Allocator& a) {
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_str(shape));
  auto s = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dt), c, a);
  return Tensor(std::move(s), 0, shape, dt);
}

Tensor Tensor::zeros(const Shape& shape, DType dt, MemCategory c, Allocator& a) {
  Tensor t = empty(shape, dt, c, a);
  t.zero();
  return t;
}

Tensor Tensor::meta(const Shape& shape, DType dt, MemCategory c, Allocator& a) {
  auto s = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dt), c, a, false);
  return Tensor(std::move(s), 0, shape, dt);
}

void* Tensor::raw() const {
  if (!storage_) throw std::logic_error("access to an undefined tensor");
  if (!storage_->materialized())
    throw std::logic_error("access to tensor " + shape_str(shape_) + " whose storage holds no data");
  if (device() != Device::cpu) throw std::logic_error("host access to a device tensor");
  return static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_);
}

void* Tensor::device_ptr() const {
  if (!storage_) throw std::logic_error("access to an undefined tensor");
  if (!storage_->materialized())
    throw std::logic_error("access to tensor " + shape_str(shape_) + " whose storage holds no data");
  return static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_);
}

Tensor Tensor::view(int64_t elem_offset, const Shape& shape) const {
  if (!storage_) throw std::logic_error("view of an undefined tensor");
  const int64_t n = shape_numel(shape);
  if (elem_offset < 0 || elem_offset + n > numel())
    throw std::out_of_range("view " + shape_str(shape) + " at offset " + std::to_string(elem_offset) +
                            " does not fit in tensor " + shape_str(shape_));
  return Tensor(storage_, offset_ + elem_offset, shape, dtype_);
}

void Tensor::fill(float v) const {
  if (!storage_) throw std::logic_error("fill of an undefined tensor");
  if (dtype_ == DType::f32 && device() == Device::cpu) {
    float* p = data<float>();
    for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = v;
    return;
  }
  // Through the host: fills are initialisation and the loss seed, never a step's bulk work.
  if (dtype_ == DType::f32) {
    Tensor host = Tensor::empty(shape_, DType::f32, storage_->category());
    host.fill(v);
    copy_from(host);
    return;
  }
  if (dtype_ != DType::bf16 && dtype_ != DType::f16)
    throw std::invalid_argument("fill of a tensor of dtype " + std::string(dtype_name(dtype_)));
  const uint16_t h = dtype_ == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
  Tensor rounded = Tensor::empty(shape_, dtype_, storage_->category());
  std::fill_n(rounded.data<uint16_t>(), numel(), h);
  copy_from(rounded);
}

void Tensor::zero() const {
  if (numel()) allocator().zero(device_ptr(), nbytes());
}

void Tensor::copy_from(const Tensor& src, bool wait) const {
  if (src.dtype() != dtype_ || src.numel() != numel())
    throw std::invalid_argument("copy of " + shape_str(src.shape()) + " " + std::string(dtype_name(src.dtype())) +
                                " into " + shape_str(shape_) + " " + std::string(dtype_name(dtype_)));
  if (!numel()) return;
  Allocator& a = device() != Device::cpu ? allocator() : src.allocator();
  a.copy(device_ptr(), src.device_ptr(), nbytes(), wait);
}

Tensor Tensor::to(Allocator& a, MemCategory c) const {
  Tensor t = Tensor::empty(shape_, dtype_, c, a);
  t.copy_from(*this);
  return t;
}

void Tensor::set_requires_grad(bool on, bool leaf) {
  if (!on) {
    autograd_.reset();
    return;
  }
  if (!autograd_) autograd_ = std::make_shared<AutogradMeta>();
  autograd_->leaf = leaf;
}

bool Tensor::is_leaf() const { return !autograd_ || autograd_->leaf; }

const Tensor& Tensor::grad() const {
  static const Tensor none;
  return autograd_ ? autograd_->grad : none;
}

const Tensor& Tensor::ensure_grad() const {
  if (!autograd_) throw std::logic_error("gradient asked of a tensor that does not require grad");
  Tensor& g = autograd_->grad;
  if (!g.defined()) {
    const MemCategory c = autograd_->leaf ? MemCategory::gradients : MemCategory::activations;
    g = Tensor::zeros(shape_, dtype_, c, allocator());
  }
  return g;
}

void Tensor::bind_grad(const Tensor& g) const {
  if (!autograd_) throw std::logic_error("bind_grad on a tensor that does not require grad");
  if (g.shape() != shape_ || g.dtype() != dtype_)
    throw std::invalid_argument("gradient " + shape_str(g.shape()) + " does not match tensor " + shape_str(shape_));
  // The slot keeps a plain copy: a gradient has no gradient, and a tensor that is its own
  // gradient (the fused cross-entropy) must not own itself through the slot.
  Tensor plain = g;
  plain.autograd_.reset();
  autograd_->grad = std::move(plain);
}

void Tensor::release_grad() const {
  if (autograd_) autograd_->grad = Tensor();
}

}  // namespace zt
