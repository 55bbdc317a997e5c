// bench_comm_mpi: OpenMPI's MPI_Allreduce (float32 sum) at bench_comm's sizes, the peer that
// bench_comm runs with `mpirun -np P` in the same session. Prints, on rank 0, one line per size:
// "allreduce <bytes> <µs per call of each repetition...>" (the slowest rank's time).
//   mpirun -np 2 bench_comm_mpi <reps> <max MiB>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const std::size_t max_bytes = (argc > 2 ? std::size_t(std::max(1, std::atoi(argv[2]))) : 64) << 20;
  for (std::size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    std::vector<float> buf(bytes / 4, 1.0f);
    const int iters = int(std::clamp<std::size_t>((std::size_t(64) << 20) / bytes, 5, 2000));
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(buf.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);  // warm-up
    if (rank == 0) std::printf("allreduce %zu", bytes);
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i)
        MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(buf.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      double t = (MPI_Wtime() - t0) / iters, slowest = 0;
      MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (rank == 0) std::printf(" %.6g", slowest * 1e6);
    }
    if (rank == 0) std::printf("\n");
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
