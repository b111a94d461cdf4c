// Integration-test helper: a plain MPI program (MPI_Init, MPI_Allreduce, MPI_Finalize)
// that prints "mpi rank=R size=N sum=S"; under dlrun it proves that a wrapper's own PMIx
// client does not break the program's.
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("mpi rank=%d size=%d sum=%d\n", rank, size, sum);
  MPI_Finalize();
  return sum == size * (size - 1) / 2 ? 0 : 1;
}
