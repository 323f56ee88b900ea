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
#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

#include "droce/sim/partition.h"

#ifdef DROCE_HAVE_MPI
#include <mpi.h>
#endif

namespace droce::sim_mpi {

// The first of the launchers' variables `vars` set to a positive count; 1
// when none is.
inline uint32_t launcher_count(std::initializer_list<const char*> vars) {
  for (const char* var : vars) {
    if (const char* v = std::getenv(var)) {
      const long n = std::strtol(v, nullptr, 10);
      if (n > 0) return static_cast<uint32_t>(n);
    }
  }
  return 1;
}

// The number of processes the MPI launcher started (Open MPI's, MPICH's
// or a PMIx launcher's environment); 1 when none did. Needs no MPI.
inline uint32_t launched_size() {
  return launcher_count({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"});
}

// How many of them run on this machine (they share its memory); 1 when
// no launcher says.
inline uint32_t launched_local_size() {
  return launcher_count({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMIX_LOCAL_SIZE"});
}

// The point-to-point layer (Open MPI's PML) to ask for before MPI_Init,
// or null to leave Open MPI's choice: "ob1" (shared memory, TCP) when Open
// MPI started every process on this machine and nobody chose one
// (OMPI_MCA_pml, which `mpirun --mca pml X` sets too). On one machine the
// frames only ever go through shared memory, and Open MPI's default first
// tries its fabric layers (cm with its MTLs, UCX): about 0.2 s of every
// process's start here, where none of them is then used. Every process
// sees the same environment, so all choose alike. `env` is std::getenv's
// shape (tests pass their own).
template <class Env>
const char* single_machine_pml(Env&& env) {
  const char* size = env("OMPI_COMM_WORLD_SIZE");
  const char* local = env("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!size || !local || env("OMPI_MCA_pml")) return nullptr;
  return std::string_view(size) == local ? "ob1" : nullptr;
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
  std::vector<uint8_t> in_;  // kept: its pages stay mapped from one window to the next
  std::vector<MPI_Request> requests_;
};
#endif

}  // namespace droce::sim_mpi
