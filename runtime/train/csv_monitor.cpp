#include "runtime/train/csv_monitor.hpp"

#include <fcntl.h>

#include <charconv>
#include <filesystem>
#include <utility>

namespace zt {

namespace {

namespace fs = std::filesystem;

std::string shortest(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Whether a row of an earlier attempt's file lies at or before `keep_through` samples.
bool row_kept(const std::string& line, int64_t keep_through) {
  int64_t samples = 0;
  const auto r = std::from_chars(line.data(), line.data() + line.size(), samples);
  return r.ec == std::errc() && r.ptr != line.data() + line.size() && *r.ptr == ',' && samples <= keep_through;
}

}  // namespace

std::string csv_file_name(const std::string& tag) {
  std::string name = tag;
  for (char& c : name)
    if (c == '/' || c == ' ') c = '_';
  return name + ".csv";
}

CsvMonitor::CsvMonitor(std::string folder, int64_t keep_through, std::string what)
    : folder_(std::move(folder)), what_(std::move(what)), keep_through_(keep_through) {
  create_parent((fs::path(folder_) / "x").string(), what_);
}

CheckpointFile& CsvMonitor::file_for(const std::string& tag) {
  auto it = files_.find(tag);
  if (it != files_.end()) return *it->second;
  const std::string path = (fs::path(folder_) / csv_file_name(tag)).string();
  // Opened the first time the run writes the tag: a fresh run's file starts anew, a resumed run's
  // keeps its rows up to the resumed step.
  if (keep_through_ >= 0 && fs::exists(path)) {
    bool header = true;
    keep_lines(path, [&](const std::string& l) { return std::exchange(header, false) || row_kept(l, keep_through_); }, what_);
  }
  if (keep_through_ < 0 || !fs::exists(path) || fs::file_size(path) == 0)
    write_atomically(path, "step," + tag.substr(tag.rfind('/') + 1) + "\n", what_);
  auto file = std::make_unique<CheckpointFile>(path, O_WRONLY | O_APPEND, what_);
  return *files_.emplace(tag, std::move(file)).first->second;
}

void CsvMonitor::write(int64_t samples, const std::vector<Scalar>& scalars) {
  for (const Scalar& s : scalars) {
    const std::string row = std::to_string(samples) + "," + shortest(s.value) + "\n";
    file_for(s.tag).append(row.data(), row.size());
  }
}

}  // namespace zt
