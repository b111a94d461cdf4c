// Integration-test helper: a plain MPI program (MPI_Init, MPI_Allreduce, MPI_Finalize)
// that prints "mpi rank=R size=N sum=S"; under dlrun it proves that a wrapper's own PMIx
// client does not break the program's.
// With --abort-when-ended it then waits for two SIGTERMs, Slurm's (a stop: dlrun ignores
// it for the program) and dlrun's (the end of the run), and calls MPI_Abort(1), as an MPI
// program does whose collective fails because a peer ended before it: Open MPI aborts the
// whole step, whatever the ranks' dlrun decided.
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

namespace {
volatile std::sig_atomic_t sigterms = 0;
void on_sigterm(int) { sigterms = sigterms + 1; }
}  // namespace

int main(int argc, char** argv) {
  const bool abort_when_ended = argc > 1 && std::strcmp(argv[1], "--abort-when-ended") == 0;
  MPI_Init(&argc, &argv);
  if (abort_when_ended) std::signal(SIGTERM, on_sigterm);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int sum = 0;
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("mpi rank=%d size=%d sum=%d\n", rank, size, sum);
  std::fflush(stdout);
  if (abort_when_ended) {
    while (sigterms < 2) usleep(20'000);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return sum == size * (size - 1) / 2 ? 0 : 1;
}
