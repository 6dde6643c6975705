#include "comm/mpi_ring.hpp"

#include <algorithm>
#include <cstring>

namespace zt::mpi {

namespace {

// Tags of ring messages: kTagBase + (ring number % kTags), within the MPI_TAG_UB every MPI library
// offers (32767).
constexpr int kTagBase = 8192;
constexpr int kTags = 16384;

// A reduce-scatter ring ([Note: ring reduce-scatter]), and with `gather` (out: chunk `rank` of
// `gather`) the all-gather steps of [Note: ring all-reduce] after it.
class Ring final : public Pending {
 public:
  Ring(std::shared_ptr<RingLane> lane, uint64_t number, MPI_Comm comm, int rank, int size,
                    const float* in, float* out, int c, ReduceOp op, float* gather = nullptr,
                    std::shared_ptr<Tensor> keep = nullptr)
      : lane_(std::move(lane)), number_(number), comm_(comm), rank_(rank), n_(size),
        tag_(kTagBase + static_cast<int>(number % kTags)), in_(in), out_(out), c_(c), op_(op), gather_(gather),
        keep_(std::move(keep)) {}

  // Abandoned in flight (a timeout, a peer gone): the receive is cancelled, which MPI completes
  // locally. A send cannot be taken back (Open MPI does not cancel sends), so it is let go and the
  // lane's buffer with it: leaked rather than handed to another ring while MPI may still read it.
  // A ring that failed while it had its turn passes it on.
  ~Ring() override {
    int finalized = 0;  // after MPI_Finalize nothing may call MPI: the requests went with it
    MPI_Finalized(&finalized);
    if (finalized) reqs_[1] = MPI_REQUEST_NULL;
    if (reqs_[1] != MPI_REQUEST_NULL) {
      MPI_Cancel(&reqs_[1]);
      MPI_Wait(&reqs_[1], MPI_STATUS_IGNORE);
    }
    if (reqs_[0] != MPI_REQUEST_NULL) {
      if (!finalized) MPI_Request_free(&reqs_[0]);
      new std::shared_ptr<Tensor>(std::move(lane_->buffer));  // never freed, on purpose
      if (keep_) new std::shared_ptr<Tensor>(std::move(keep_));  // the all-gather sends from it
    }
    if (started_ && !finished_) ++lane_->turn;
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  bool advance() override {
    if (finished_) return true;
    if (!started_ && !begin()) return false;
    while (step_ < n_ - 1) {
      int flag = 0;
      check(MPI_Testall(2, reqs_, &flag, MPI_STATUSES_IGNORE), "reduce_scatter ring step");
      if (!flag) return false;
      const int idx = (rank_ + 2 * n_ - step_ - 2) % n_;  // the chunk that arrived from the left
      const float* mine = in_ + static_cast<size_t>(idx) * c_;
      if (op_ == ReduceOp::max)
        for (int i = 0; i < c_; ++i) tmp_[i] = std::max(tmp_[i], mine[i]);
      else
        for (int i = 0; i < c_; ++i) tmp_[i] += mine[i];
      std::swap(cur_, tmp_);
      if (++step_ < n_ - 1) post();
    }
    if (!reduced_) {
      std::memcpy(out_, cur_, bytes());
      reduced_ = true;
      if (gather_) post_gather();
    }
    while (gather_ && gstep_ < n_ - 1) {
      int flag = 0;
      check(MPI_Testall(2, reqs_, &flag, MPI_STATUSES_IGNORE), "all_reduce ring step");
      if (!flag) return false;
      if (++gstep_ < n_ - 1) post_gather();
    }
    finished_ = true;
    ++lane_->turn;
    return true;
  }

 private:
  size_t bytes() const { return static_cast<size_t>(c_) * sizeof(float); }

  // Once it is this ring's turn: the lane's buffer (grown where it is short) and the first step.
  bool begin() {
    if (lane_->turn != number_) return false;
    const int64_t need = 2 * static_cast<int64_t>(c_);
    if (!lane_->buffer || lane_->buffer->numel() < need)
      lane_->buffer = std::make_shared<Tensor>(Tensor::empty({need}, DType::f32, MemCategory::communication));
    started_ = true;
    cur_ = lane_->buffer->data<float>();
    tmp_ = cur_ + c_;
    const int left = (rank_ + n_ - 1) % n_;
    std::memcpy(cur_, in_ + static_cast<size_t>(left) * c_, bytes());
    post();
    return true;
  }

  // This step's messages: the chunk reduced so far to the right, the next one from the left.
  void post() {
    const int right = (rank_ + 1) % n_, left = (rank_ + n_ - 1) % n_;
    check(MPI_Isend(cur_, c_, MPI_FLOAT, right, tag_, comm_, &reqs_[0]), "reduce_scatter ring: MPI_Isend");
    check(MPI_Irecv(tmp_, c_, MPI_FLOAT, left, tag_, comm_, &reqs_[1]), "reduce_scatter ring: MPI_Irecv");
  }

  // All-gather step gstep_: chunk rank - gstep_ (reduced here, or received in the last step) to
  // the right, chunk rank - gstep_ - 1 from the left, both in place in gather_.
  void post_gather() {
    const int right = (rank_ + 1) % n_, left = (rank_ + n_ - 1) % n_;
    const auto send = static_cast<size_t>((rank_ - gstep_ + n_) % n_);
    const auto recv = static_cast<size_t>((rank_ - gstep_ - 1 + 2 * n_) % n_);
    check(MPI_Isend(gather_ + send * c_, c_, MPI_FLOAT, right, tag_, comm_, &reqs_[0]), "all_reduce ring: MPI_Isend");
    check(MPI_Irecv(gather_ + recv * c_, c_, MPI_FLOAT, left, tag_, comm_, &reqs_[1]), "all_reduce ring: MPI_Irecv");
  }

  std::shared_ptr<RingLane> lane_;
  uint64_t number_;
  MPI_Comm comm_;
  int rank_, n_, tag_;
  const float* in_;
  float* out_;
  int c_;
  ReduceOp op_;
  float* gather_;                // the all-reduce's buffer; null for a reduce-scatter
  std::shared_ptr<Tensor> keep_;  // what holds gather_'s memory
  bool started_ = false, reduced_ = false, finished_ = false;
  int gstep_ = 0;
  float* cur_ = nullptr;  // the chunk being sent: reduced over the ranks to the left so far
  float* tmp_ = nullptr;  // the chunk being received
  int step_ = 0;
  MPI_Request reqs_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};  // send, receive
};

}  // namespace

std::unique_ptr<Pending> start_ring_reduce_scatter(std::shared_ptr<RingLane> lane, uint64_t number, MPI_Comm comm,
                                                   int rank, int size, const float* in, float* out, int c,
                                                   ReduceOp op) {
  auto ring = std::make_unique<Ring>(std::move(lane), number, comm, rank, size, in, out, c, op);
  if (ring->advance()) return nullptr;  // its turn, and its messages were there already
  return ring;
}

std::unique_ptr<Pending> start_ring_all_reduce(std::shared_ptr<RingLane> lane, uint64_t number, MPI_Comm comm, int rank,
                                               int size, std::shared_ptr<Tensor> keep, float* buf, int c, ReduceOp op) {
  // Chunk `rank` is written only after the last read of it (start_ring_reduce_scatter's contract).
  auto ring = std::make_unique<Ring>(std::move(lane), number, comm, rank, size, buf,
                                                  buf + static_cast<size_t>(rank) * c, c, op, buf, std::move(keep));
  if (ring->advance()) return nullptr;
  return ring;
}

}  // namespace zt::mpi
