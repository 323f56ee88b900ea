// PartitionComm over MPI: the frames by MPI_Isend and matched receives
// (MPI_Mprobe, MPI_Mrecv); small words by MPI_Allgather.
#include "droce/sim_mpi/mpi_comm.h"

#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace droce::sim_mpi {

MpiComm::MpiComm(int* argc, char*** argv) {
  if (const char* pml = single_machine_pml([](const char* v) { return std::getenv(v); }))
    ::setenv("OMPI_MCA_pml", pml, 0);
  MPI_Init(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  index_ = static_cast<uint32_t>(rank);
  count_ = static_cast<uint32_t>(size);
}

MpiComm::~MpiComm() { MPI_Finalize(); }

// One message to each other partition (empty ones too: the receiver
// waits for one from everyone), sent at once; then each partition's in
// partition order, its length read off the matched message (MPI_Mprobe)
// and its bytes received straight into their place in in_. An exchange of
// the counts first (MPI_Alltoall) cost a round of its own in every window.
// MPI keeps the order of messages between two processes on one tag, so a
// window's message is never taken for the next window's.
std::span<const uint8_t> MpiComm::exchange(const std::vector<std::vector<uint8_t>>& out) {
  constexpr size_t kMaxCount = static_cast<size_t>(std::numeric_limits<int>::max());
  requests_.clear();
  for (uint32_t p = 0; p < count_; ++p) {
    if (p == index_) continue;
    // MPI counts are ints: a window's frames are far below 2 GiB, and so
    // is a report unless its time series are that large.
    if (out[p].size() > kMaxCount)
      throw std::runtime_error("partition exchange: over 2 GiB to one partition");
    requests_.emplace_back();
    MPI_Isend(out[p].data(), static_cast<int>(out[p].size()), MPI_BYTE, static_cast<int>(p), 0,
              MPI_COMM_WORLD, &requests_.back());
  }
  size_t total = 0;
  for (uint32_t p = 0; p < count_; ++p) {
    if (p == index_) continue;
    MPI_Message message;
    MPI_Status status;
    MPI_Mprobe(static_cast<int>(p), 0, MPI_COMM_WORLD, &message, &status);
    int n = 0;
    MPI_Get_count(&status, MPI_BYTE, &n);
    if (in_.size() < total + static_cast<size_t>(n)) in_.resize(total + static_cast<size_t>(n));
    MPI_Mrecv(in_.data() + total, n, MPI_BYTE, &message, MPI_STATUS_IGNORE);
    total += static_cast<size_t>(n);
  }
  MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  return {in_.data(), total};
}

std::vector<uint64_t> MpiComm::allgather(std::span<const uint64_t> mine) {
  std::vector<uint64_t> all(mine.size() * count_);
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_UINT64_T, all.data(),
                static_cast<int>(mine.size()), MPI_UINT64_T, MPI_COMM_WORLD);
  return all;
}

}  // namespace droce::sim_mpi
