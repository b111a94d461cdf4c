#include "tests/unit/exp/fake_slurm_jobs.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "client/decision_file.h"
#include "core/sysio.h"
#include "exp/journal.h"
#include "exp/writer.h"

namespace dl::exp::search {

FakeSlurmJobs::FakeSlurmJobs(std::string root, std::string experiment, std::string metric)
    : root_(std::move(root)), experiment_(std::move(experiment)), metric_(std::move(metric)) {}

double FakeSlurmJobs::loss(double lr, std::int64_t step) {
  return std::pow(std::log10(lr) + 2, 2) + 1.0 / static_cast<double>(step + 1);
}

void FakeSlurmJobs::enter() {
  ++calls_;
  if ((calls_ == kill_at_ && !kill_after_) || (kill_when_ && kill_when_())) {
    kill_when_ = nullptr;
    throw Killed{};
  }
}

void FakeSlurmJobs::leave() {
  if (calls_ == kill_at_ && kill_after_) throw Killed{};
}

FakeSlurmJobs::Job* FakeSlurmJobs::find(const std::string& id) {
  for (auto& j : jobs_) {
    if (j.q.id == id) return &j;
  }
  return nullptr;
}

Submitted FakeSlurmJobs::submit(const std::vector<std::string>& options,
                                const std::vector<std::string>& env) {
  enter();
  Job j;
  j.q.id = std::to_string(next_id_++);
  j.q.state = "PENDING";
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (options[i] == "-J" && i + 1 < options.size()) j.q.name = options[i + 1];
    if (options[i].rfind("--dl-trial=", 0) == 0) j.trial = options[i].substr(11);
    if (options[i] == "--hold") j.held = true;
  }
  for (const auto& v : env) {
    if (v.rfind("DL_MAX_STEPS=", 0) == 0) j.budget = std::stoll(v.substr(13));
    if (v.rfind("DL_HPARAMS=", 0) == 0) j.lr = nlohmann::json::parse(v.substr(11)).at("lr");
    if (v.rfind("DL_SEARCH_RUNG=", 0) == 0) j.rung = std::stoll(v.substr(15));
    if (v.rfind("DL_SEARCH_DECISIONS=", 0) == 0) j.decisions = v.substr(20);
  }
  jobs_.push_back(j);
  leave();
  return {j.q.id, ""};
}

void FakeSlurmJobs::run(Job& job) {
  JournalWriter w(journals_dir(root_, experiment_), "run-" + job.q.id);
  for (std::int64_t s = 0; s < job.budget; ++s) {
    w.append({{"kind", "metrics"},
              {"trial", job.trial},
              {"step", s},
              {"time", now_seconds()},
              {"values", {{metric_, loss(job.lr, s)}}}},
             false);
  }
  w.append({{"kind", "checkpoint"},
            {"trial", job.trial},
            {"step", job.budget - 1},
            {"time", now_seconds()},
            {"path", sys::join(root_, job.trial + "/step-" + std::to_string(job.budget - 1))}},
           true);
}

void FakeSlurmJobs::live(Job& j) {
  if (j.q.state == "PENDING" && !j.held && !j.q.requeue_held) {
    j.q.state = "RUNNING";
    j.looks_running = 0;
  } else if (j.q.state == "RUNNING" && j.waiting) {
    const std::string path = sys::join(j.decisions, decision::file_name(j.trial, j.q.id, j.rung));
    if (sys::file_type(path) != sys::FileType::file) return;
    sys::remove_tree(path + std::string(decision::kWaitSuffix));
    j.waiting = false;
    const auto next = decision::parse(sys::read_file(path, 4096));
    if (!next) {
      j.q.state = "COMPLETED";
      return;
    }
    j.rung = next->rung;
    j.budget = next->budget;
    j.looks_running = 0;
  } else if (j.q.state == "RUNNING" && ++j.looks_running == kRunLooks) {
    run(j);
    if (j.decisions.empty()) {
      j.q.state = "COMPLETED";
      return;
    }
    sys::write_file_durably(sys::join(j.decisions, decision::file_name(j.trial, j.q.id, j.rung)) +
                                std::string(decision::kWaitSuffix),
                            std::to_string(j.budget - 1) + "\n");
    j.waiting = true;
  }
}

std::vector<QueuedJob> FakeSlurmJobs::queue() {
  enter();
  for (auto& j : jobs_) live(j);
  if (on_queue_) on_queue_();
  std::vector<QueuedJob> out;
  for (const auto& j : jobs_) out.push_back(j.q);
  leave();
  return out;
}

std::string FakeSlurmJobs::cancel(const std::string& id) {
  enter();
  Job* j = find(id);
  std::string error = "Invalid job id specified";
  if (j != nullptr && (j->q.state == "PENDING" || j->q.state == "RUNNING")) {
    j->q.state = "CANCELLED";
    error.clear();
  } else if (j != nullptr) {
    error = "Job/step already completing or completed";
  }
  leave();
  return error;
}

std::string FakeSlurmJobs::hold(const std::string& id) {
  enter();
  Job* j = find(id);
  if (j != nullptr && j->q.state == "PENDING") j->held = true;
  leave();
  return j != nullptr ? "" : "Invalid job id specified";
}

std::string FakeSlurmJobs::requeue_hold(const std::string& id) {
  enter();
  Job* j = find(id);
  if (j != nullptr && j->q.state == "RUNNING") {
    j->q.state = "PENDING";
    j->q.requeue_held = true;
  }
  leave();
  return j != nullptr ? "" : "Invalid job id specified";
}

std::string FakeSlurmJobs::release(const std::string& id) {
  enter();
  Job* j = find(id);
  if (j != nullptr) {
    j->held = false;
    j->q.requeue_held = false;
  }
  leave();
  return j != nullptr ? "" : "Invalid job id specified";
}

double FakeSlurmJobs::time_left(const std::string& id) {
  enter();
  const Job* j = find(id);
  const bool running = j != nullptr && j->q.state == "RUNNING";
  leave();
  return running ? 3600 : -1;
}

}  // namespace dl::exp::search
