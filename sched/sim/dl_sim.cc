// dl-sim: replays a job trace under Slurm's FIFO + backfill or this project's policy,
// and generates the IBM FfDL seed workload. See dl-sim(1).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/cli.h"
#include "core/error.h"
#include "sched/priority.h"
#include "sched/sim/generate.h"
#include "sched/sim/simulator.h"
#include "sched/trace.h"

namespace {

std::string read_all(const std::string& path) {
  if (path == "-") {
    std::ostringstream text;
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw dl::SystemError(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes the CSV `header` line and the rows `write_rows(out)` writes to `path`.
template <typename WriteRows>
void write_csv(const std::string& path, const char* header, WriteRows write_rows) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << header << "\n";
  write_rows(out);
  out.close();
  if (!out) throw dl::SystemError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

void print_result(const dl::sim::Result& r, const dl::sim::Options& o, bool json) {
  if (json) {
    const nlohmann::ordered_json j = {
        {"avg_jct_s", r.avg_jct_s},
        {"p50_jct_s", r.p50_jct_s},
        {"p95_jct_s", r.p95_jct_s},
        {"avg_queue_s", r.avg_queue_s},
        {"gpu_util", r.gpu_util},
        {"idle_while_fit", r.idle_while_fit},
        {"idle_while_node_fit", r.idle_while_node_fit},
        {"makespan_s", r.makespan_s},
        {"split_small_jobs", r.split_small_jobs},
        {"preemptions", r.preemptions},
        {"reshapes", r.reshapes},
        {"lost_gpu_s", r.lost_gpu_s},
    };
    std::cout << j.dump() << '\n';
    return;
  }
  fmt::print("policy {}{} on {} nodes x {} GPUs, {} jobs\n", dl::sim::to_string(o.policy),
             o.clairvoyant ? " (clairvoyant: remaining GPU-time from the trace)" : "", o.nodes,
             o.gpus_per_node, r.jobs);
  fmt::print("  job completion time  avg {:.0f} s, p50 {:.0f} s, p95 {:.0f} s\n", r.avg_jct_s,
             r.p50_jct_s, r.p95_jct_s);
  fmt::print("  queue (to first start) avg {:.0f} s\n", r.avg_queue_s);
  fmt::print("  GPU utilization {:.3f} (first to last submit), makespan {:.0f} s\n", r.gpu_util,
             r.makespan_s);
  fmt::print("  GPUs idle while a job that fits them waits {:.3f} (fits on one node: {:.3f})\n",
             r.idle_while_fit, r.idle_while_node_fit);
  fmt::print("  small gangs split over nodes {}, preemptions {}, lost {:.0f} GPU-s\n",
             r.split_small_jobs, r.preemptions, r.lost_gpu_s);
  if (o.policy == dl::sim::Policy::dl &&
      dl::sim::modelled_shapes(o) == dl::sim::Shapes::even_reshaped) {
    fmt::print("  reshapes {}\n", r.reshapes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dl-sim: replay a GPU job trace under Slurm's FIFO + backfill or the slurm-dl policy"};
  dl::add_standard_flags(app, "dl-sim");

  std::string trace_path;
  std::string policy_name;
  std::string priority_text;
  bool json = false;
  std::string outcomes_path;
  std::string runs_path;
  dl::sim::Options o;
  app.add_option("trace", trace_path,
                 "trace CSV (columns by header name: job_id,submit_s,duration_s,num_gpu[,user]"
                 "[,checkpointable], others ignored); - for stdin");
  app.add_option("--nodes", o.nodes, "nodes in the cluster")->check(CLI::Range(1u, 1000000u));
  app.add_option("--gpus-per-node", o.gpus_per_node, "GPUs per node")->check(CLI::Range(1u, 1024u));
  app.add_option("--nodes-per-switch", o.nodes_per_switch,
                 "nodes under each leaf switch (0: none)");
  app.add_option("--policy", policy_name, "fifo-backfill or dl");
  app.add_option("--limit-factor", o.limit_factor,
                 "time limit = duration x U(1, F), rounded up to a round value")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1000.0));
  bool minute_limits = false;
  app.add_flag("--minute-limits", minute_limits,
               "round time limits up to a minute, not to the round values users pick");
  app.add_option("--seed", o.seed, "seed for the time limits")->capture_default_str();
  app.add_flag("--json", json, "print the metrics as one JSON object");
  app.add_option("--outcomes", outcomes_path,
                 "write every job's submit, start and end (CSV: job_id,submit_s,start_s,end_s)");
  app.add_option("--runs", runs_path,
                 "write every start, preemption, end of the requeue hold and end (CSV: "
                 "job_id,time_s,event,work_done_s)");
  app.add_option("--restore-cost", o.restore_s,
                 "seconds a restarted job spends loading its checkpoint")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ckpt-every", o.ckpt_every_s,
                 "checkpoint interval of checkpointable jobs, seconds")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--grace", o.grace_s,
                 "seconds a job needs to write its final checkpoint (--dl-grace)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--bf-interval", o.bf_interval_s, "seconds between backfill passes (bf_interval)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--bf-depth", o.bf_depth, "jobs a backfill pass considers (bf_max_job_test)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 10000000u));
  app.add_option("--bf-window", o.bf_window_s,
                 "how far ahead backfill reserves, seconds (bf_window)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--bf-resolution", o.bf_resolution_s,
                 "time resolution of backfill reservations, seconds (bf_resolution)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--clock-offset", o.clock_offset_s,
                 "the controller's clock (epoch seconds) at the trace's time 0: Slurm aligns "
                 "backfill reservations to bf_resolution and its will-run windows to 30 s on it")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--priority-params", priority_text,
                 "dl priority and preemption margin, as PrioritySiteFactorParameters");
  std::string shapes = "pack";
  app.add_option("--shapes", shapes,
                 "dl: gangs larger than a node as job_submit/dl's pack (whole nodes; pack-first: "
                 "placed as Slurm's cons_tres does and under Slurm's schedulers) or even "
                 "(split evenly over shared nodes; even-first: that split only, placed as Slurm's "
                 "cons_tres does and under Slurm's schedulers, as the plugins run; "
                 "even-reshaped: as even-first, and at each of site_factor/dl's samples a job "
                 "that does not fit now in its split takes another even split that does, as "
                 "the plugins do with reshape=yes, which even-first then also means)")
      ->capture_default_str();
  app.add_flag("--clairvoyant", o.clairvoyant,
               "dl: a reference, not a policy: pending jobs by remaining GPU-time, read from the "
               "trace, and preemption of jobs with twice as much (what knowing run times would "
               "gain)");
  app.add_option("--requeue-delay", o.requeue_delay_s, "seconds Slurm holds a requeued job")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);

  auto* gen = app.add_subcommand("gen", "write a generated trace");
  bool ibm = false;
  dl::sim::IbmFfdlOptions g;
  std::string output = "-";
  gen->add_flag("--ibm-ffdl", ibm, "the IBM FfDL seed workload (the only generator)")->required();
  gen->add_option("--load", g.load, "offered load (GPU demand / cluster GPUs)")->required();
  gen->add_option("--seed", g.seed, "random seed")->capture_default_str();
  gen->add_option("--jobs", g.jobs, "number of jobs")->capture_default_str();
  gen->add_option("--nodes", g.nodes, "nodes of the cluster the load refers to")
      ->capture_default_str();
  gen->add_option("--gpus-per-node", g.gpus_per_node, "GPUs per node of that cluster")
      ->capture_default_str();
  gen->add_option("-o,--output", output, "output file (- for stdout)")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (gen->parsed()) {
      const auto jobs = dl::sim::generate_ibm_ffdl(g);
      if (output == "-") {
        dl::write_trace(std::cout, jobs);
      } else {
        std::ofstream out(output, std::ios::binary | std::ios::trunc);
        if (!out)
          throw dl::SystemError(fmt::format("cannot write {}: {}", output, std::strerror(errno)));
        dl::write_trace(out, jobs);
        out.close();
        if (!out)
          throw dl::SystemError(fmt::format("cannot write {}: {}", output, std::strerror(errno)));
      }
      return 0;
    }
    if (trace_path.empty()) throw dl::InputError("missing the trace file (see --help)");
    if (app.count("--nodes") == 0 || app.count("--gpus-per-node") == 0) {
      throw dl::InputError("--nodes and --gpus-per-node are required");
    }
    if (policy_name.empty()) throw dl::InputError("--policy is required (fifo-backfill or dl)");
    o.policy = dl::sim::parse_policy(policy_name);
    o.round_limits = !minute_limits;
    o.priority = dl::parse_priority_params(priority_text);
    o.shapes = dl::sim::parse_shapes(shapes);
    std::vector<dl::TraceJob> jobs;
    try {
      jobs = dl::parse_trace(read_all(trace_path));
    } catch (const dl::InputError& e) {
      throw dl::InputError(trace_path + ": " + e.what());
    }
    o.record_runs = !runs_path.empty();
    const auto result = dl::sim::simulate(std::move(jobs), o);
    if (!runs_path.empty()) {
      write_csv(runs_path, "job_id,time_s,event,work_done_s", [&](std::ofstream& out) {
        for (const auto& e : result.runs) {
          out << fmt::format("{},{},{},{}\n", e.job, e.t, e.event, e.work_done_s);
        }
      });
    }
    if (!outcomes_path.empty()) {
      write_csv(outcomes_path, "job_id,submit_s,start_s,end_s", [&](std::ofstream& out) {
        for (const auto& j : result.outcomes) {
          out << fmt::format("{},{},{},{}\n", j.name, j.submit_s, j.start_s, j.end_s);
        }
      });
    }
    print_result(result, o, json);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "dl-sim: {}\n", e.what());
  }
  return 1;
}
