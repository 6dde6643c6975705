// The checkpoint folder (checkpoint.dir) as a whole: whether a run may save into it, what killed
// saves left there, and keep_last. One checkpoint's own files: runtime/checkpoint/checkpoint.hpp.
//
// [Note: one history per folder] A folder holds one run's history: `latest` names its newest
// checkpoint, and keep_last removes the lowest step numbers first. A new run (no --resume) saving
// into a folder that holds another run's checkpoints would mix the two: `latest` pointed back to
// the new run's step 3 while the old step 10 stayed, and keep_last removed the old step 5 and
// then the new run's own checkpoints. So before the first step such a run is refused (every rank
// ends with the message), unless checkpoint.overwrite is true: then the run's first save, once
// complete, removes the old checkpoints (a run that fails before that leaves them as they were).
// A resumed run continues the history; checkpoints past the step it resumes from (a roll-back)
// stay and are replaced as the run reaches their steps, or go with its first save under
// checkpoint.overwrite. Before the first step the folder is also created, every rank checks that
// it can create files there (several hosts need it on a shared file system), a publish killed
// between its renames is completed, and the step_<k>.tmp folders killed saves left are removed:
// they hold the space the next save needs.
//
// [Note: keep_last waits for a finite step] A checkpoint can hold a finite state that the next
// step turns into a NaN loss (an update with lr 1e30 gives weights of 1e30). So keep_last does not
// remove older checkpoints when a save is published, but once a step after it came out finite
// (or the run ended): a run that diverges right after a save keeps the checkpoints before it.
// The checkpoints a run replaces under checkpoint.overwrite go at that moment too.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/config.hpp"

namespace zt {

class CheckpointRoot {
 public:
  // Collective: every rank, with the same config, before the first step (the folder is
  // checkpoint.dir). CheckpointError on every rank when the folder is refused, cannot be created
  // or a rank cannot create files in it, naming the folder, the key and what to do.
  CheckpointRoot(const Config& cfg, Communicator& comm);

  // For the log (rank 0; empty when there is nothing to say): the checkpoints this run replaces.
  const std::string& note() const { return note_; }
  // Every rank, after step_<step> was published and `latest` names it.
  void saved(int step) { unconfirmed_ = step; }
  // Every rank, after a finite step or at the end of the run ([Note: keep_last waits for a finite
  // step]): if a save is waiting, rank 0 removes the checkpoints this run replaces (after its
  // first save), then, with keep_last, the oldest beyond that many (never the one saved).
  void confirm();

 private:
  std::string root_, note_;
  int keep_last_;
  bool lead_;
  int unconfirmed_ = -1;  // a step saved that no finite step has followed yet
  std::vector<std::string> superseded_;
};

// Whether `path` is a name ztrain manages in the checkpoint folder `root` (its `latest`, or
// anything under a step_<k> folder, present or to come), which no other output may take.
bool in_checkpoint_folder(const std::string& root, const std::string& path);

}  // namespace zt
