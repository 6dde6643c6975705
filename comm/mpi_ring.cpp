#include "comm/mpi_ring.hpp"

#include <algorithm>
#include <cstring>

namespace zt::mpi {

namespace {

class RingReduceScatter final : public Pending {
 public:
  RingReduceScatter(MPI_Comm comm, int rank, int size, int tag, const float* in, float* out, int c, ReduceOp op,
                    std::shared_ptr<Tensor> scratch)
      : comm_(comm), rank_(rank), n_(size), tag_(tag), in_(in), out_(out), c_(c), op_(op),
        scratch_(std::move(scratch)), cur_(scratch_->data<float>()), tmp_(cur_ + c) {
    const int left = (rank_ + n_ - 1) % n_;
    std::memcpy(cur_, in_ + static_cast<size_t>(left) * c_, bytes());
    post();
  }

  // Abandoned in flight (a timeout, a peer gone): the receive is cancelled, which MPI completes
  // locally. A send cannot be taken back (Open MPI does not cancel sends), so it is let go and its
  // buffer with it: leaked rather than handed to another operation while MPI may still read it.
  ~RingReduceScatter() override {
    if (reqs_[1] != MPI_REQUEST_NULL) {
      MPI_Cancel(&reqs_[1]);
      MPI_Wait(&reqs_[1], MPI_STATUS_IGNORE);
    }
    if (reqs_[0] != MPI_REQUEST_NULL) {
      MPI_Request_free(&reqs_[0]);
      new std::shared_ptr<Tensor>(std::move(scratch_));  // never freed, on purpose
    }
  }
  RingReduceScatter(const RingReduceScatter&) = delete;
  RingReduceScatter& operator=(const RingReduceScatter&) = delete;

  bool advance() override {
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
    std::memcpy(out_, cur_, bytes());
    return true;
  }

 private:
  size_t bytes() const { return static_cast<size_t>(c_) * sizeof(float); }

  // This step's messages: the chunk reduced so far to the right, the next one from the left.
  void post() {
    const int right = (rank_ + 1) % n_, left = (rank_ + n_ - 1) % n_;
    check(MPI_Isend(cur_, c_, MPI_FLOAT, right, tag_, comm_, &reqs_[0]), "reduce_scatter ring: MPI_Isend");
    check(MPI_Irecv(tmp_, c_, MPI_FLOAT, left, tag_, comm_, &reqs_[1]), "reduce_scatter ring: MPI_Irecv");
  }

  MPI_Comm comm_;
  int rank_, n_, tag_;
  const float* in_;
  float* out_;
  int c_;
  ReduceOp op_;
  std::shared_ptr<Tensor> scratch_;
  float* cur_;  // the chunk being sent: reduced over the ranks to the left so far
  float* tmp_;  // the chunk being received
  int step_ = 0;
  MPI_Request reqs_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};  // send, receive
};

}  // namespace

std::unique_ptr<Pending> start_ring_reduce_scatter(MPI_Comm comm, int rank, int size, int tag, const float* in,
                                                   float* out, int c, ReduceOp op, std::shared_ptr<Tensor> scratch) {
  return std::make_unique<RingReduceScatter>(comm, rank, size, tag, in, out, c, op, std::move(scratch));
}

}  // namespace zt::mpi
