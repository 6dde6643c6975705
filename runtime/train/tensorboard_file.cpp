#include "runtime/train/tensorboard_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <isa-l/crc.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "runtime/tensorboard_event.pb.h"  // generated from runtime/train/tensorboard_event.proto

namespace zt {

namespace {

namespace fs = std::filesystem;
namespace pb = zt::tensorboard;

constexpr std::string_view kPrefix = "events.out.tfevents.";

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// One TFRecord around `event`.
std::string record(const pb::Event& event) {
  std::string data, out;
  event.SerializeToString(&data);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

// A whole record read: where it lies in the file and what it holds.
struct RawRecord {
  size_t offset = 0, size = 0;
  EventRecord event;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<RawRecord> read_records(const std::string& bytes, bool* intact) {
  std::vector<RawRecord> out;
  size_t at = 0;
  bool whole = true;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12 || get_le(&bytes[at + 8], 4) != masked_crc32c(&bytes[at], 8)) {
      whole = false;
      break;
    }
    const uint64_t n = get_le(&bytes[at], 8);
    pb::Event e;
    if (n > bytes.size() - at - 16 || get_le(&bytes[at + 12 + n], 4) != masked_crc32c(&bytes[at + 12], n) ||
        !e.ParseFromArray(&bytes[at + 12], static_cast<int>(n))) {
      whole = false;
      break;
    }
    RawRecord r{at, 16 + n, {e.step(), e.wall_time(), e.file_version(), {}}};
    if (e.has_summary())
      for (const pb::SummaryValue& v : e.summary().value()) r.event.scalars.push_back({v.tag(), v.simple_value()});
    out.push_back(std::move(r));
    at += 16 + n;
  }
  if (intact) *intact = whole;
  return out;
}

std::vector<std::string> event_files(const std::string& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec))
    if (entry.path().filename().string().starts_with(kPrefix) && entry.is_regular_file(ec))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A name of the folder's own pattern that sorts after every one of `taken`.
std::string new_name(const std::vector<std::string>& taken) {
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  auto seconds = static_cast<long long>(now_seconds());
  for (;; ++seconds) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%010lld", seconds);
    const std::string name = std::string(kPrefix) + buf + "." + host + "." + std::to_string(::getpid());
    if (taken.empty() || name > taken.back()) return name;
  }
}

}  // namespace

uint32_t masked_crc32c(const void* p, size_t n) {
  // ISA-L's crc32_iscsi with an initial ~0 is CRC-32C before its final inversion.
  uint32_t crc = ~crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(p)), static_cast<int>(n), 0xffffffffu);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::vector<EventRecord> read_event_file(const std::string& path, bool* intact) {
  std::vector<EventRecord> out;
  for (RawRecord& r : read_records(read_bytes(path), intact)) out.push_back(std::move(r.event));
  return out;
}

TensorBoardFile::TensorBoardFile(const std::string& folder, int64_t keep_through, std::string what)
    : what_(std::move(what)) {
  const std::vector<std::string> taken = event_files(folder);
  std::string path;
  if (keep_through >= 0 && !taken.empty()) {
    // [Note: event files]: the newest file is this run's; its records past the resumed step go.
    path = (fs::path(folder) / taken.back()).string();
    bool intact = true;
    const std::string bytes = read_bytes(path);
    const std::vector<RawRecord> records = read_records(bytes, &intact);
    // A file of the folder's pattern whose first record is not an event file's header is not one
    // a run wrote: never cut, the run stops naming it.
    if (!bytes.empty() && (records.empty() || records[0].event.file_version.empty()))
      throw std::runtime_error(what_ + ": '" + path + "' is not a TensorBoard event file (its first record is not " +
                               "one), yet it is the newest of the folder's, which a resumed run continues; move it away");
    size_t keep = 0;
    while (keep < records.size() && records[keep].event.step <= keep_through) ++keep;
    if (keep < records.size() || !intact) {
      const size_t end = keep ? records[keep - 1].offset + records[keep - 1].size : 0;
      write_atomically(path, bytes.substr(0, end), what_);
    }
  } else {
    create_parent((fs::path(folder) / "x").string(), what_);
    path = (fs::path(folder) / new_name(taken)).string();
  }
  const bool fresh = !fs::exists(path) || fs::file_size(path) == 0;
  file_ = std::make_unique<CheckpointFile>(path, O_WRONLY | O_CREAT | O_APPEND, what_);
  if (fresh) {
    pb::Event e;
    e.set_wall_time(now_seconds());
    e.set_file_version("brain.Event:2");
    const std::string r = record(e);
    file_->append(r.data(), r.size());
  }
}

void TensorBoardFile::write(int64_t samples, const std::vector<Scalar>& scalars) {
  pb::Event e;
  e.set_wall_time(now_seconds());
  e.set_step(samples);
  pb::Summary* summary = e.mutable_summary();
  for (const Scalar& s : scalars) {
    pb::SummaryValue* v = summary->add_value();
    v->set_tag(s.tag);
    v->set_simple_value(static_cast<float>(s.value));
  }
  const std::string r = record(e);
  file_->append(r.data(), r.size());
}

}  // namespace zt
