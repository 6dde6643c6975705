#include "tensor/meta_allocator.hpp"

#include <cstdint>
#include <cstring>

namespace zt {

namespace {

static_assert(sizeof(void*) == 8, "meta addresses need a 64-bit address space");

// [Note: meta addresses] Every meta allocation starts at kBase: nothing reads meta memory, so
// allocations need not lie apart, and no memory is reserved for them. [2^55, 2^56) lies above
// every user address space Linux hands out unasked (x86-64: 2^47, 5-level paging only for
// mappings asked above it; arm64: 2^48, or 2^52) and below the tag bits (arm64's top byte, x86's
// LAM), so a kernel that read or wrote meta memory would fault at once, and a copy tells meta
// memory from host memory by its address, tagged or not.
constexpr uintptr_t kBase = uintptr_t{1} << 55, kSpan = uintptr_t{1} << 55;

bool is_meta(const void* p) { return reinterpret_cast<uintptr_t>(p) - kBase < kSpan; }

}  // namespace

void* MetaAllocator::allocate(size_t bytes, MemCategory c) {
  if (bytes == 0) return nullptr;
  accounting_.add(c, bytes);
  return reinterpret_cast<void*>(kBase);
}

void MetaAllocator::deallocate(void* p, size_t bytes, MemCategory c) {
  if (p) accounting_.sub(c, bytes);
}

void MetaAllocator::copy(void* dst, const void*, size_t bytes, bool) {
  if (bytes && !is_meta(dst)) std::memset(dst, 0, bytes);
}

}  // namespace zt
