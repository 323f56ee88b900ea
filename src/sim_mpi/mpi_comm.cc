// PartitionComm over MPI: the counts by MPI_Alltoall, then the frames by
// MPI_Isend/MPI_Irecv; small words by MPI_Allgather.
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
  send_counts_.assign(count_, 0);
  recv_counts_.assign(count_, 0);
}

MpiComm::~MpiComm() { MPI_Finalize(); }

// The counts by MPI_Alltoall, then each partition's bytes straight from
// its buffer and into its place in in_ (no packing copy).
std::span<const uint8_t> MpiComm::exchange(const std::vector<std::vector<uint8_t>>& out) {
  constexpr size_t kMaxCount = static_cast<size_t>(std::numeric_limits<int>::max());
  for (uint32_t p = 0; p < count_; ++p) {
    const size_t n = p == index_ ? 0 : out[p].size();
    // MPI counts are ints: a window's frames are far below 2 GiB, and so
    // is a report unless its time series are that large.
    if (n > kMaxCount) throw std::runtime_error("partition exchange: over 2 GiB to one partition");
    send_counts_[p] = static_cast<int>(n);
  }
  MPI_Alltoall(send_counts_.data(), 1, MPI_INT, recv_counts_.data(), 1, MPI_INT, MPI_COMM_WORLD);
  size_t total = 0;
  for (uint32_t p = 0; p < count_; ++p) total += static_cast<size_t>(recv_counts_[p]);
  if (in_.size() < total) in_.resize(total);
  requests_.clear();
  size_t at = 0;
  for (uint32_t p = 0; p < count_; ++p) {
    if (recv_counts_[p] == 0) continue;
    requests_.emplace_back();
    MPI_Irecv(in_.data() + at, recv_counts_[p], MPI_BYTE, static_cast<int>(p), 0, MPI_COMM_WORLD,
              &requests_.back());
    at += static_cast<size_t>(recv_counts_[p]);
  }
  for (uint32_t p = 0; p < count_; ++p) {
    if (send_counts_[p] == 0) continue;
    requests_.emplace_back();
    MPI_Isend(out[p].data(), send_counts_[p], MPI_BYTE, static_cast<int>(p), 0, MPI_COMM_WORLD,
              &requests_.back());
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
