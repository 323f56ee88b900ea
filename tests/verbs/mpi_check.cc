// An MPI program that checks every byte it moves (perftest and the
// ping-pongs check none): a ping-pong of patterned messages from 1 byte to
// 4 MiB, MPI_Allreduce of values every rank can predict, MPI_Alltoall of
// patterned blocks. Prints "mismatches: N" on rank 0; exit 1 unless N is
// 0. Run by ucx_test.py under mpirun over UCX on libdroce-verbs.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

uint8_t pattern(int from, int round, size_t i) {
  return static_cast<uint8_t>((i * 131u) ^ (static_cast<unsigned>(from) * 17u) ^
                              (static_cast<unsigned>(round) * 7u));
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long mismatches = 0;
  int round = 0;

  // Ping-pong between ranks 0 and 1: each direction its own pattern.
  if (size >= 2 && rank < 2) {
    const int peer = 1 - rank;
    for (size_t len = 1; len <= (size_t{4} << 20); len *= 4, ++round) {
      std::vector<uint8_t> out(len), in(len);
      for (size_t i = 0; i < len; ++i) out[i] = pattern(rank, round, i);
      for (int rep = 0; rep < 4; ++rep) {
        if (rank == 0) {
          MPI_Send(out.data(), static_cast<int>(len), MPI_BYTE, peer, round, MPI_COMM_WORLD);
          MPI_Recv(in.data(), static_cast<int>(len), MPI_BYTE, peer, round, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(in.data(), static_cast<int>(len), MPI_BYTE, peer, round, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
          MPI_Send(out.data(), static_cast<int>(len), MPI_BYTE, peer, round, MPI_COMM_WORLD);
        }
        for (size_t i = 0; i < len; ++i) mismatches += in[i] != pattern(peer, round, i);
      }
    }
  }

  // Allreduce: rank r contributes r + i at element i; the sum is known.
  const int n = 1 << 16;
  std::vector<int64_t> mine(n), sum(n);
  for (int i = 0; i < n; ++i) mine[i] = rank + i;
  MPI_Allreduce(mine.data(), sum.data(), n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  const int64_t ranks_sum = static_cast<int64_t>(size) * (size - 1) / 2;
  for (int i = 0; i < n; ++i)
    mismatches += sum[i] != ranks_sum + static_cast<int64_t>(size) * i;

  // Alltoall: the block from rank s to rank d is patterned by (s, d).
  const size_t block = 64 * 1024;
  std::vector<uint8_t> send(block * size), recv(block * size);
  for (int d = 0; d < size; ++d)
    for (size_t i = 0; i < block; ++i) send[d * block + i] = pattern(rank, 100 + d, i);
  MPI_Alltoall(send.data(), static_cast<int>(block), MPI_BYTE, recv.data(),
               static_cast<int>(block), MPI_BYTE, MPI_COMM_WORLD);
  for (int s = 0; s < size; ++s)
    for (size_t i = 0; i < block; ++i) mismatches += recv[s * block + i] != pattern(s, 100 + rank, i);

  long total = 0;
  MPI_Reduce(&mismatches, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) std::printf("ranks: %d mismatches: %ld\n", size, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
