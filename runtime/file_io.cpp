#include "runtime/file_io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace zt {

namespace fs = std::filesystem;

void fail_errno(const std::string& action, const std::string& path, const std::string& what) {
  throw CheckpointError(what + ": " + action + " '" + path + "': " + std::strerror(errno));
}

CheckpointFile::CheckpointFile(const std::string& path, int flags, std::string what)
    : path_(path), what_(std::move(what)), fd_(::open(path.c_str(), flags | O_CLOEXEC, 0644)) {
  if (fd_ < 0) fail_errno((flags & O_CREAT) ? "cannot create" : "cannot open", path, what_);
}

CheckpointFile::~CheckpointFile() {
  if (fd_ >= 0) ::close(fd_);
}

void CheckpointFile::write_at(const void* p, size_t n, uint64_t off) const {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, b, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail_errno("cannot write", path_, what_);
    b += w, n -= static_cast<size_t>(w), off += static_cast<uint64_t>(w);
  }
}

void CheckpointFile::append(const void* p, size_t n) const {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd_, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail_errno("cannot write", path_, what_);
    b += w, n -= static_cast<size_t>(w);
  }
}

bool CheckpointFile::read_at(void* p, size_t n, uint64_t off) const {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::pread(fd_, b, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail_errno("cannot read", path_, what_);
    if (r == 0) return false;
    b += r, n -= static_cast<size_t>(r), off += static_cast<uint64_t>(r);
  }
  return true;
}

void CheckpointFile::sync() const {
  if (::fsync(fd_) != 0) fail_errno("cannot fsync", path_, what_);
}

void sync_dir(const std::string& dir) { CheckpointFile(dir, O_RDONLY | O_DIRECTORY).sync(); }

void write_atomically(const std::string& path, const std::string& text, const std::string& what) {
  ReplacedFile f(path, what);
  f.file().write_at(text.data(), text.size(), 0);
  f.commit();
}

void keep_lines(const std::string& path, const std::function<bool(const std::string&)>& keep, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  std::string kept;
  for (std::string line; std::getline(in, line) && !in.eof();)  // eof: no newline after it
    if (keep(line)) kept += line + '\n';
  in.close();
  write_atomically(path, kept, what);
}

void rename_synced(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail_errno("cannot rename into", to);
  const std::string parent = fs::path(to).parent_path().string();
  sync_dir(parent.empty() ? "." : parent);
}

std::string write_target(const std::string& target) {
  std::error_code ec;
  if (!fs::is_symlink(target, ec)) return target;
  const fs::path real = fs::weakly_canonical(target, ec);
  return ec ? target : real.string();
}

void check_replaceable(const std::string& target, const std::string& what) {
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  const char* kind = S_ISDIR(st.st_mode)    ? "folder"
                     : S_ISCHR(st.st_mode)  ? "character device"
                     : S_ISBLK(st.st_mode)  ? "block device"
                     : S_ISFIFO(st.st_mode) ? "FIFO"
                     : S_ISSOCK(st.st_mode) ? "socket"
                                            : "special file";
  throw CheckpointError(what + ": '" + target + "' is a " + kind +
                        ", not a regular file; it is written by renaming a new file over it, which would replace "
                        "the " + kind + " itself: name a file");
}

void create_parent(const std::string& file, const std::string& what) {
  const fs::path parent = fs::path(file).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw CheckpointError(what + ": cannot create the folder '" + parent.string() + "': " + ec.message());
}

fs::path resolved_path(const std::string& path) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) r = fs::absolute(path, ec).lexically_normal();
  if (r.has_relative_path() && r.filename().empty()) r = r.parent_path();  // "dir/" as "dir"
  return r;
}

bool lies_within(const std::string& path, const std::string& folder) {
  const fs::path p = resolved_path(path), f = resolved_path(folder);
  return std::mismatch(f.begin(), f.end(), p.begin(), p.end()).first == f.end();
}

int remove_stale_temporaries(const std::string& folder) {
  std::error_code ec;
  int removed = 0;
  for (const auto& e : fs::directory_iterator(folder.empty() ? "." : folder, ec)) {
    const std::string name = e.path().filename().string();
    // NAME.tmp-<pid>-<n>: digits, a dash, digits, to the end.
    const size_t at = name.rfind(".tmp-");
    if (at == std::string::npos || at == 0) continue;
    const std::string tail = name.substr(at + 5);
    const size_t dash = tail.find('-');
    auto digits = [](std::string_view s) { return !s.empty() && s.size() < 10 && s.find_first_not_of("0123456789") == s.npos; };
    if (dash == std::string::npos || !digits(tail.substr(0, dash)) || !digits(tail.substr(dash + 1))) continue;
    const auto pid = static_cast<pid_t>(std::stol(tail.substr(0, dash)));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to tell)
    std::error_code rm;
    if (e.is_regular_file(rm) && fs::remove(e.path(), rm)) ++removed;
  }
  return removed;
}

ReplacedFile::ReplacedFile(const std::string& target, const std::string& what)
    : target_(write_target(target)), what_(what) {
  check_replaceable(target_, what_);
  create_parent(target_, what_);
  const std::string stem = target_ + ".tmp-" + std::to_string(::getpid()) + "-";
  std::error_code ec;
  for (int n = 0;; ++n) {  // a new name: never another file's (a killed run's, the user's)
    temp_ = stem + std::to_string(n);
    if (!fs::exists(fs::symlink_status(temp_, ec))) break;
  }
  scratch_.add(temp_, [&] { file_ = std::make_unique<CheckpointFile>(temp_, O_WRONLY | O_CREAT | O_EXCL, what_); });
}

ReplacedFile::~ReplacedFile() {
  if (committed_) return;
  file_.reset();
  ::unlink(temp_.c_str());
  scratch_.keep();  // removed already
}

void ReplacedFile::close() {
  if (!file_) return;
  file_->sync();
  file_.reset();
}

void ReplacedFile::commit() {
  close();
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail_errno("cannot rename a new file into", target_, what_);
  scratch_.keep();  // the name is the target's now: nothing to remove
  committed_ = true;
  const std::string parent = fs::path(target_).parent_path().string();
  sync_dir(parent.empty() ? "." : parent);
}

}  // namespace zt
