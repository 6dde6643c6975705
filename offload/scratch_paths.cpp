#include "offload/scratch_paths.hpp"

#include <unistd.h>

#include <algorithm>
#include <mutex>

namespace zt {

namespace {

// Every live ScratchPaths, oldest first.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<ScratchPaths*>& registry() {
  static std::vector<ScratchPaths*> r;
  return r;
}

}  // namespace

ScratchPaths::ScratchPaths() {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(this);
}

ScratchPaths::~ScratchPaths() {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  remove_locked();
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), this), r.end());
}

void ScratchPaths::add(std::string path) {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  paths_.push_back(std::move(path));
}

void ScratchPaths::add(std::string path, const std::function<void()>& create) {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  paths_.push_back(std::move(path));
  try {
    create();
  } catch (...) {
    paths_.pop_back();  // not created: nothing to remove
    throw;
  }
}

void ScratchPaths::keep() {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  paths_.clear();
}

void ScratchPaths::remove_locked() {
  // A folder fails harmlessly unless empty; a file an I/O is still writing goes with its name.
  for (auto it = paths_.rbegin(); it != paths_.rend(); ++it)
    if (::unlink(it->c_str()) != 0) ::rmdir(it->c_str());
  paths_.clear();
}

size_t remove_scratch_paths() {
  registry_mutex().lock();  // never unlocked: the process is ending ([Note: scratch paths])
  size_t n = 0;
  auto& r = registry();
  for (auto it = r.rbegin(); it != r.rend(); ++it) {
    n += (*it)->paths_.size();
    (*it)->remove_locked();
  }
  return n;
}

}  // namespace zt
