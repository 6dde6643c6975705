// Tensor: dtype, shape, a shared Storage and an element offset into it. Views into one flat buffer
// are the normal case (a unit's parameters are views of its flat buffer). Tensors are always
// contiguous; kernels that need strided access (heads inside qkv) index it themselves.
//
// [Note: storage that comes and goes] A Storage can be released and materialized again while
// tensors still refer to it; a ZeRO-3 unit frees its gathered buffer after forward and gathers it
// again before backward, and the views captured by the tape see the new data. A Storage may also
// be created without data (metadata only) so memory can be planned before it is allocated.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tensor/allocator.hpp"
#include "tensor/dtype.hpp"

namespace zt {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);

class Storage {
 public:
  // Allocates `bytes` now unless `materialize_now` is false.
  Storage(size_t bytes, MemCategory c, Allocator& a = cpu_allocator(), bool materialize_now = true);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  MemCategory category() const { return category_; }
  Device device() const { return allocator_->device(); }
  Allocator& allocator() const { return *allocator_; }
  bool materialized() const { return data_ != nullptr || bytes_ == 0; }
  void materialize();  // no-op if already there; contents are undefined
  void release();      // frees the bytes, keeps the size

 private:
  void* data_ = nullptr;
  size_t bytes_;
  MemCategory category_;
  Allocator* allocator_;
};

struct AutogradMeta;

[[noreturn]] void throw_dtype_mismatch(DType have, std::string_view want);

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(const Shape& shape, DType dt = DType::f32, MemCategory c = MemCategory::other,
                      Allocator& a = cpu_allocator());
  static Tensor zeros(const Shape& shape, DType dt = DType::f32, MemCategory c = MemCategory::other,
                      Allocator& a = cpu_allocator());
  // Shape and dtype only; storage exists but holds no bytes until materialized.
  static Tensor meta(const Shape& shape, DType dt = DType::f32, MemCategory c = MemCategory::other,
                     Allocator& a = cpu_allocator());

  bool defined() const { return storage_ != nullptr; }
  bool has_data() const { return storage_ && storage_->materialized(); }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  int64_t offset() const { return offset_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu; }
  // Where this tensor's bytes come from (cpu_allocator() for an undefined tensor): new tensors
  // that belong beside it (its gradient, an op's outputs) come from the same one.
  Allocator& allocator() const { return storage_ ? storage_->allocator() : cpu_allocator(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  bool same_storage(const Tensor& o) const { return storage_ == o.storage_; }

  void* raw() const;  // throws if there is no data
  // raw() without the host check: the address of device memory, for handing to CUDA libraries.
  void* device_ptr() const;
  template <class T> T* data() const;

  // A view of `shape` starting `elem_offset` elements into this tensor (same storage, same dtype).
  Tensor view(int64_t elem_offset, const Shape& shape) const;
  Tensor reshape(const Shape& shape) const { return view(0, shape); }
  Tensor flatten() const { return view(0, {numel()}); }

  // Both on any device: fill(v) stores v rounded to the dtype (f32, bf16, f16); zero() any dtype.
  void fill(float v) const;
  void zero() const;
  // Copies src's bytes into this tensor (same dtype and numel), between any two devices; returns
  // once they are here, or with `wait` false possibly before ([Allocator::copy]).
  void copy_from(const Tensor& src, bool wait = true) const;
  // A copy of this tensor in `a`'s memory, charged to `c`.
  Tensor to(Allocator& a, MemCategory c) const;
  // This tensor on `a`'s device: itself when it is there already, or when it is host memory and
  // `a` the meta device, which plans a host run ([Note: the meta device]); else to(a, c).
  Tensor on(Allocator& a, MemCategory c) const {
    const bool there = device() == a.device() || (device() == Device::cpu && a.device() == Device::meta);
    return there ? *this : to(a, c);
  }

  // Autograd. A tensor that requires grad has a slot (shared by its copies) holding its gradient.
  // Parameters bind their slot to a view of the unit's flat gradient buffer; activations get a
  // zeroed buffer lazily, charged to `activations`, and drop it once their producer's backward ran.
  bool requires_grad() const { return autograd_ != nullptr; }
  // `leaf` is false for op outputs: their gradient is scratch, dropped after use.
  void set_requires_grad(bool on, bool leaf = true);
  bool is_leaf() const;
  const Tensor& grad() const;  // undefined tensor if none yet
  const Tensor& ensure_grad() const;
  void bind_grad(const Tensor& g) const;  // leaf gradient in an existing buffer
  void release_grad() const;

 private:
  Tensor(std::shared_ptr<Storage> s, int64_t off, Shape shape, DType dt)
      : storage_(std::move(s)), offset_(off), shape_(std::move(shape)), dtype_(dt) {}

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;  // in elements
  Shape shape_;
  DType dtype_ = DType::f32;
  std::shared_ptr<AutogradMeta> autograd_;
};

struct AutogradMeta {
  Tensor grad;
  bool leaf = true;
};

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::u16; }

template <class T> T* Tensor::data() const {
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (dtype_ != DType::u16 && dtype_ != DType::bf16 && dtype_ != DType::f16) throw_dtype_mismatch(dtype_, dtype_name(dtype_of<T>()));
  } else {
    if (dtype_ != dtype_of<T>()) throw_dtype_mismatch(dtype_, dtype_name(dtype_of<T>()));
  }
  return static_cast<T*>(raw());
}

}  // namespace zt
