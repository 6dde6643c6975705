// DeepSpeed's `csv_monitor` section: one CSV file a tag in the folder, as DeepSpeed's csvMonitor
// lays it out: the tag with '/' and ' ' as '_' plus ".csv" (Train_Samples_train_loss.csv), a header
// row "step,<the tag's last part>", then a row "<samples>,<value>" a step. Values are written in
// the shortest form that reads back as the same double. A fresh run starts each file anew (as
// train.metrics); a resumed run keeps each file's rows up to the samples it resumed at (the file
// replaced whole, a torn last line dropped) and appends, so a resumed curve has each step once.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/file_io.hpp"
#include "runtime/train/monitor.hpp"

namespace zt {

class CsvMonitor : public Monitor {
 public:
  CsvMonitor(std::string folder, int64_t keep_through, std::string what);
  void write(int64_t samples, const std::vector<Scalar>& scalars) override;

 private:
  CheckpointFile& file_for(const std::string& tag);
  std::string folder_, what_;
  int64_t keep_through_;
  std::map<std::string, std::unique_ptr<CheckpointFile>> files_;
};

// The file a tag's rows go to, within the folder.
std::string csv_file_name(const std::string& tag);

}  // namespace zt
