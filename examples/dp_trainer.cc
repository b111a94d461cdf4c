// A small deterministic data-parallel trainer, the C++ example of slurm-dl:
//
//   sbatch examples/dp_trainer.sbatch      (dlrun dp_trainer --steps 600 in the batch script)
//
// A linear model fitted by SGD with momentum to synthetic data. Every sample is a pure
// function of (seed, sample index), and the global batch of step k is samples
// [k*B, (k+1)*B), so the run's result depends only on the step it resumes from, not on
// when it was interrupted. Ranks take every W-th sample of the batch and sum their
// per-sample gradients with MPI_Allreduce and add them up in sample order: an
// interrupted and resumed run ends with exactly the parameters of an uninterrupted one,
// bit for bit, even when it resumes on another number of ranks (elastic).
//
// State is saved with dl::ckpt: the weights and the momentum are split by rows across
// the ranks (each rank saves its rows), and every rank reads them whole on resume, from
// any number of ranks. Checkpoints are taken when dlrun asks (dl::should_checkpoint():
// preemption, deadline, --dl-ckpt-every).
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dl/ckpt.h"
#include "dl/client.h"

namespace {

struct Config {
  std::int64_t steps = 600;
  std::uint64_t dim = 64;
  std::uint64_t batch = 256;
  double lr = 0.05;
  double momentum = 0.9;
  std::uint64_t seed = 1234;
  int step_ms = 20;
  std::string out;
};

// A counter-based generator: the same (seed, index) gives the same number on any rank.
double uniform(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E5E1ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0;  // [-1, 1)
}

struct Sample {
  std::vector<double> x;
  double y = 0;
};

Sample sample(const Config& c, const std::vector<double>& truth, std::uint64_t i) {
  Sample s;
  s.x.resize(c.dim);
  for (std::uint64_t j = 0; j < c.dim; ++j) {
    s.x[j] = uniform(c.seed, i * (c.dim + 1) + j);
    s.y += truth[j] * s.x[j];
  }
  s.y += 0.01 * uniform(c.seed, i * (c.dim + 1) + c.dim);
  return s;
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw std::runtime_error(std::string(what) + ": " + msg);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"slurm-dl example: a deterministic data-parallel trainer"};
  app.add_option("--steps", c.steps, "steps to train")->check(CLI::PositiveNumber);
  app.add_option("--dim", c.dim, "model size")->check(CLI::PositiveNumber);
  app.add_option("--batch", c.batch, "global batch size")->check(CLI::PositiveNumber);
  app.add_option("--step-ms", c.step_ms, "extra time per step, to make the run last")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", c.seed, "data seed");
  app.add_option("--out", c.out, "write the final parameters here (rank 0)");
  CLI11_PARSE(app, argc, argv);

  check(MPI_Init(&argc, &argv), "MPI_Init");
  // MPI errors come back as return codes (check() turns them into exceptions).
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  try {
    if (c.dim < static_cast<std::uint64_t>(world)) {
      throw std::invalid_argument("--dim=" + std::to_string(c.dim) + " is smaller than the " +
                                  std::to_string(world) + " ranks: every rank saves some rows");
    }
    std::vector<double> truth(c.dim), w(c.dim, 0.0), v(c.dim, 0.0);
    for (std::uint64_t j = 0; j < c.dim; ++j) truth[j] = uniform(c.seed + 1, j);

    // This rank's rows of the saved vectors: [lo, lo + n).
    const auto W = static_cast<std::uint64_t>(world), R = static_cast<std::uint64_t>(rank);
    const std::uint64_t lo = c.dim * R / W, n = c.dim * (R + 1) / W - lo;
    std::int64_t first = 0;
    double last_loss = std::nan("");
    if (const auto from = dl::resume_path()) {
      // Every rank reads both vectors whole, whatever the number of ranks that wrote them.
      const auto reader = dl::ckpt::Reader::open(*from);  // dlrun verified it (--resume-verify)
      reader.read("model/w", dl::ckpt::DType::f64, w.data());
      reader.read("optim/momentum", dl::ckpt::DType::f64, v.data());
      first = static_cast<std::int64_t>(reader.metadata().step) + 1;
      if (const auto it = reader.metadata().metrics.find("loss");
          it != reader.metadata().metrics.end()) {
        last_loss = it->second;
      }
      if (rank == 0) {
        // DL_RESTART_COUNT: how often the job started again (requeues and restarts
        // inside the allocation), as torchrun's TORCHELASTIC_RESTART_COUNT.
        const char* restarts = std::getenv("DL_RESTART_COUNT");
        std::printf("restart count %s\n", restarts ? restarts : "0");
        std::printf("resumed from %s (step %lld, written by %u ranks)\n", from->c_str(),
                    static_cast<long long>(reader.metadata().step), reader.world_size());
      }
    }
    std::optional<dl::ckpt::Checkpointer> ckpt;
    if (std::getenv("DL_CKPT_DIR")) ckpt.emplace(dl::ckpt::Options::from_env());

    // Per-sample gradients (and squared errors): each rank fills the rows of its samples
    // k = rank, rank+W, ... and leaves the others zero; MPI_Allreduce sums the table
    // (x + 0 is exact in any order) and every rank adds the rows up in sample order. The
    // result has the same bits for any number of ranks and any MPI algorithm.
    const std::uint64_t row = c.dim + 1;
    std::vector<double> table(c.batch * row), grad(row);
    for (std::int64_t step = first; step < c.steps; ++step) {
      const std::uint64_t base = static_cast<std::uint64_t>(step) * c.batch;
      std::fill(table.begin(), table.end(), 0.0);
      for (std::uint64_t k = R; k < c.batch; k += W) {
        const Sample s = sample(c, truth, base + k);
        double err = -s.y;
        for (std::uint64_t j = 0; j < c.dim; ++j) err += w[j] * s.x[j];
        double* g = table.data() + k * row;
        for (std::uint64_t j = 0; j < c.dim; ++j) g[j] = 2 * err * s.x[j];
        g[c.dim] = err * err;
      }
      check(MPI_Allreduce(MPI_IN_PLACE, table.data(), static_cast<int>(table.size()), MPI_DOUBLE,
                          MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
      std::fill(grad.begin(), grad.end(), 0.0);
      for (std::uint64_t k = 0; k < c.batch; ++k) {
        for (std::uint64_t j = 0; j < row; ++j) grad[j] += table[k * row + j];
      }
      for (std::uint64_t j = 0; j < c.dim; ++j) {
        v[j] = c.momentum * v[j] + grad[j] / static_cast<double>(c.batch);
        w[j] -= c.lr * v[j];
      }
      const double loss = grad[c.dim] / static_cast<double>(c.batch);
      last_loss = loss;
      if (c.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(c.step_ms));
      if (rank == 0) std::printf("step %lld loss %.17g\n", static_cast<long long>(step), loss);
      dl::report_step(step);
      if (step % 10 == 0) dl::report_metrics(step, {{"loss", loss}});
      if (ckpt && dl::should_checkpoint()) {
        dl::ckpt::State state;
        state.meta.step = static_cast<std::uint64_t>(step);
        state.meta.metrics["loss"] = loss;
        state.tensors.push_back(
            {"model/w", dl::ckpt::DType::f64, {n}, w.data() + lo, {c.dim}, {lo}});
        state.tensors.push_back(
            {"optim/momentum", dl::ckpt::DType::f64, {n}, v.data() + lo, {c.dim}, {lo}});
        const auto t0 = std::chrono::steady_clock::now();
        ckpt->save(state);
        if (rank == 0) {
          std::printf("checkpoint step %lld written in %.3f s\n", static_cast<long long>(step),
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          // Out before checkpoint_done(), which waits for dlrun: a step killed meanwhile
          // (a node lost) must not lose the line of a checkpoint the next run resumes.
          std::fflush(stdout);
        }
        dl::checkpoint_done(step);
      }
      std::fflush(stdout);
    }
    if (rank == 0) {
      double norm = 0;
      for (double x : w) norm += x * x;
      std::printf("final step %lld loss %.17g |w| %.17g\n", static_cast<long long>(c.steps - 1),
                  last_loss, std::sqrt(norm));
      if (!c.out.empty()) {
        const std::string tmp = c.out + ".tmp" + std::to_string(getpid());
        {
          std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
          out.write(reinterpret_cast<const char*>(w.data()),
                    static_cast<std::streamsize>(w.size() * sizeof(double)));
          if (!out.flush()) throw std::runtime_error("couldn't write " + tmp);
        }
        if (std::rename(tmp.c_str(), c.out.c_str()) != 0) {
          throw std::runtime_error("couldn't rename " + tmp + " to " + c.out);
        }
      }
    }
  } catch (const std::exception& e) {
    // No MPI_Abort: it would kill every rank's dlrun with the step before dlrun could
    // name the rank that failed first and decide what follows (a restart, a requeue).
    // No MPI_Finalize either: a peer may be gone.
    std::fprintf(stderr, "dp_trainer (rank %d): %s\n", rank, e.what());
    return 1;
  }
  MPI_Finalize();
  return 0;
}
