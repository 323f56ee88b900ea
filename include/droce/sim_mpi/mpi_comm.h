// PartitionComm over MPI (sim/partition.h): each MPI rank of
// MPI_COMM_WORLD runs the partition of its rank number.
//
//   mpirun -np 2 droce-sim scenario.toml
//
// launched_size() reads the launcher's environment, so a program can tell
// an mpirun start from a plain one before it initialises MPI (and a plain
// start never initialises it).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "droce/sim/partition.h"

#ifdef DROCE_HAVE_MPI
#include <mpi.h>
#endif

namespace droce::sim_mpi {

// The number of processes the MPI launcher started (Open MPI's, MPICH's
// or a PMIx launcher's environment); 1 when none did. Needs no MPI.
inline uint32_t launched_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* v = std::getenv(var)) {
      const long n = std::strtol(v, nullptr, 10);
      if (n > 0) return static_cast<uint32_t>(n);
    }
  }
  return 1;
}

#ifdef DROCE_HAVE_MPI
class MpiComm : public sim::PartitionComm {
 public:
  // MPI_Init; MPI_Finalize when destroyed.
  MpiComm(int* argc, char*** argv);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  uint32_t index() const override { return index_; }
  uint32_t count() const override { return count_; }
  std::span<const uint8_t> exchange(const std::vector<std::vector<uint8_t>>& out) override;
  std::vector<uint64_t> allgather(std::span<const uint64_t> mine) override;

 private:
  uint32_t index_ = 0, count_ = 1;
  std::vector<int> send_counts_, recv_counts_;
  std::vector<uint8_t> in_;  // kept: its pages stay mapped from one window to the next
  std::vector<MPI_Request> requests_;
};
#endif

}  // namespace droce::sim_mpi
