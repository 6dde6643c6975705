// TensorBoard's event files: DeepSpeed's `tensorboard` section ([Note: event files]).
//
// [Note: event files] An event file is a sequence of TFRecord records (the length as a
// little-endian uint64, its masked CRC-32C, the bytes, their masked CRC-32C) each holding one
// `Event` protobuf (runtime/train/tensorboard_event.proto): the first names the format
// ("brain.Event:2"), then one a step with that step's scalars. The protobufs are encoded by
// Debian's protobuf (lite runtime) and the CRC-32C comes from ISA-L, neither written here. A
// step's record goes to the file in one write(2) on an O_APPEND descriptor, so a run killed at any
// point leaves whole records (at worst a torn last one, which TensorBoard's reader stops at).
//
// A folder may hold several files, read by TensorBoard in name order; the name is
// events.out.tfevents.<seconds>.<host>.<pid>, made to sort after every event file already there.
// A fresh run starts a file of its own and leaves the folder's other files alone (PyTorch's
// SummaryWriter does the same). A resumed run continues the same curves with each step once: it
// takes the newest file, the one its earlier attempt wrote, keeps its records up to the step it
// resumed at (the file replaced whole, [Note: replacing a file] in runtime/file_io.hpp, a torn or
// corrupt tail dropped), and appends to it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/file_io.hpp"
#include "runtime/train/monitor.hpp"

namespace zt {

class TensorBoardFile : public Monitor {
 public:
  // `folder` is created; errors name `what` ("tensorboard") and the path.
  TensorBoardFile(const std::string& folder, int64_t keep_through, std::string what);
  void write(int64_t samples, const std::vector<Scalar>& scalars) override;
  const std::string& path() const { return file_->path(); }

 private:
  std::unique_ptr<CheckpointFile> file_;
  std::string what_;
};

// One record of an event file, as read back.
struct EventRecord {
  int64_t step = 0;
  double wall_time = 0;
  std::string file_version;  // the first record's; empty on the others
  std::vector<Scalar> scalars;
};

// The whole records at the head of an event file, up to the first torn or corrupt one (*intact
// false then, the bytes after it not read).
std::vector<EventRecord> read_event_file(const std::string& path, bool* intact = nullptr);

// TFRecord's masked CRC-32C of `n` bytes.
uint32_t masked_crc32c(const void* p, size_t n);

}  // namespace zt
