#include "kernels/cuda/lazy_library.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "kernels/cuda/kernels.hpp"

namespace zt::cuda {

namespace {

std::mutex g_open;

// The folder of the CUDA runtime this process linked: where the toolkit keeps the others, when
// the loader's own search (LD_LIBRARY_PATH, the executable's RUNPATH, ld.so.cache) does not know it.
std::string runtime_folder() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&cudaGetDeviceCount), &info) == 0 || !info.dli_fname) return "";
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

}  // namespace

LazyLibrary::LazyLibrary(std::string soname, std::string what) : soname_(std::move(soname)), what_(std::move(what)) {}

LazyLibrary::~LazyLibrary() {
  // Left open: other code may still hold its functions at exit, and the process unmaps it anyway.
}

void* LazyLibrary::symbol(const char* name) const {
  {
    const std::lock_guard<std::mutex> lock(g_open);
    if (!handle_) {
      handle_ = ::dlopen(soname_.c_str(), RTLD_NOW | RTLD_LOCAL);
      std::string why = handle_ ? "" : ::dlerror();
      if (!handle_) {
        const std::string folder = runtime_folder();
        if (!folder.empty()) handle_ = ::dlopen((folder + "/" + soname_).c_str(), RTLD_NOW | RTLD_LOCAL);
      }
      if (!handle_)
        throw CudaError(what_ + ": cannot open " + soname_ + " (" + why +
                        "): install the CUDA toolkit's library or put its folder on LD_LIBRARY_PATH");
    }
  }
  ::dlerror();
  void* f = ::dlsym(handle_, name);
  if (!f) throw CudaError(what_ + ": " + soname_ + " has no " + name + " (an older library than this build's headers?)");
  return f;
}

}  // namespace zt::cuda
