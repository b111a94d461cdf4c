#include "launcher/coordinator.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>

#include "core/drain.h"
#include "core/error.h"
#include "core/log.h"
#include "launcher/recovery.h"

namespace dl {
namespace {

using namespace std::chrono_literals;

// How often rank 0 re-reads the job: an administrator may change its time limit.
constexpr auto kJobRefresh = 60s;

// How long a failed rank's exit waits for a likelier culprit (Coordinator::failure_).
constexpr auto kFailureWindow = 1s;

Message end_message(int code, const std::string& why) {
  Message m;
  m.kind = MsgKind::end;
  m.code = code;
  m.text = why;
  return m;
}

}  // namespace

Coordinator::Coordinator(const SupervisorOptions& options, const JobSettings& job,
                         std::uint32_t world_size, std::optional<Resumed> resume,
                         JobControl& control, Broadcast broadcast)
    : options_(options),
      job_(job),
      world_size_(world_size),
      control_(control),
      broadcast_(std::move(broadcast)),
      exited_(world_size, false),
      nodes_(world_size),
      save_time_(std::chrono::duration_cast<std::chrono::milliseconds>(job.grace)),
      limiter_(options.status_interval),
      gpu_(options.gpu_idle) {
  if (resume) {
    ckpt_at_start_ = resume->step;
    ckpt_step_ = resume->step;
    ckpt_time_ = resume->written;
  }
}

void Coordinator::start(Steady::time_point now) {
  run_started_ = now;
  if (job_.ckpt_every) next_periodic_ = now + *job_.ckpt_every;
  next_status_ = now;
  refresh_job();
  if (job_info_) comment_prefix_ = comment_prefix(job_info_->comment);
  if (job_info_) control_.record_logs({job_info_->std_out, job_info_->std_err});
  next_job_refresh_ = now + kJobRefresh;
  if (job_.job) {
    run_.job = job_.job->to_string();
    run_.run = job_.restart_count;
    run_.requeues = job_.requeue_count;
    run_.gpus = job_.gpus;
    run_.started = run_.updated = control_.wall_now();
    if (job_info_) {
      run_.submitted = job_info_->submitted;
      run_.allocated = job_info_->started;
    }
    save_run_record();
  }
  update_status(now, true);
}

void Coordinator::save_run_record() {
  if (!job_.job) return;
  run_.updated = control_.wall_now();
  const std::int64_t step = control_.progress().step;
  if (step >= 0) run_.step = step;
  control_.save_run_record(run_);
}

void Coordinator::set_node(std::uint32_t rank, const std::string& node) {
  if (rank < nodes_.size()) nodes_[rank] = node;
}

void Coordinator::refresh_job() {
  if (!job_.job) return;
  try {
    job_info_ = control_.load_job(*job_.job);
  } catch (const std::exception& e) {
    log(LogLevel::warning, "{} (no deadline checkpoint or status line until it works)", e.what());
  }
}

void Coordinator::on_resumed() { refresh_job(); }

void Coordinator::on_message(std::uint32_t rank, const Message& m, Steady::time_point now) {
  switch (m.kind) {
    case MsgKind::want: want(m.flag, m.text, now); break;
    case MsgKind::step:
      if (round_ && round_->seq() == m.seq && !target_sent_) {
        round_->report(rank, StepReport{m.flag, m.step});
        if (round_->reports_complete()) round_reports_complete(now);
      }
      break;
    case MsgKind::done:
      if (round_ && round_->seq() == m.seq) {
        round_->done(rank);
        check_round(now);
      }
      break;
    case MsgKind::exit: {
      // A program that fails while it saves the checkpoint that ends the run (its save
      // raised, say) leaves nothing to resume: a failure, not the run's stop.
      const bool unsaved =
          round_ &&
          round_->failed_to_checkpoint(rank, m.code, options_.ckpt_signal == SIGTERM ? SIGTERM : 0);
      if (rank < exited_.size()) exited_[rank] = true;
      if (round_ && !unsaved) {
        round_->exited(rank);
        if (!target_sent_ && round_->reports_complete()) round_reports_complete(now);
      }
      const bool stopping = round_ && round_->stop();
      const bool all_exited = std::all_of(exited_.begin(), exited_.end(), [](bool e) { return e; });
      if (m.code != 0 && (!stopping || unsaved)) {
        hold_failure(rank, m.code,
                     unsaved ? fmt::format("rank {} failed before its checkpoint was written ({})",
                                           rank, m.text)
                             : fmt::format("rank {} {}", rank, m.text),
                     now);
        if (all_exited && failure_) end_failed(now);
      } else if (all_exited) {
        if (failure_) {
          end_failed(now);
        } else if (stopping) {
          check_round(now);
        } else {
          end_run(RunEnd::completed, 0, "every rank completed", now);
        }
      } else {
        check_round(now);
      }
      break;
    }
    case MsgKind::gpu:
      try {
        const std::string node = rank < nodes_.size() && !nodes_[rank].empty()
                                     ? nodes_[rank]
                                     : fmt::format("rank {}", rank);
        auto samples = parse_gpu_samples(m.text);
        run_.add_samples(node, samples);
        gpu_.record(node, std::move(samples), now);
      } catch (const SystemError& e) {
        log(LogLevel::warning, "rank {}: {}", rank, e.what());
      }
      break;
    default:
      log(LogLevel::warning, "rank {} sent an unexpected '{}'", rank,
          format_message(m).substr(0, 40));
  }
}

void Coordinator::on_rank_lost(std::uint32_t rank, const std::string& node, const std::string& why,
                               Steady::time_point now) {
  if (rank < exited_.size() && exited_[rank]) return;
  // After a failure, a rank whose dlrun goes is its consequence (an MPI program's abort
  // kills the step's tasks): the failure ends the run.
  if (failure_) {
    end_failed(now);
    return;
  }
  if (!ending_) {
    lost_node_ = node;
    if (!node.empty()) culprit_ = Culprit{node, rank, CulpritKind::lost};
  }
  end_run(RunEnd::failed, 1, fmt::format("lost rank {}: {}", rank, why), now);
}

void Coordinator::want(bool stop, const std::string& why, Steady::time_point now) {
  if (ending_) return;
  if (round_) {
    if (stop && !round_->stop()) {
      // The checkpoint in progress becomes the last one of this run.
      round_->make_stop();
      control_.record_event("stop_requested", why);
      round_why_ = why;
      round_deadline_ = std::min(round_deadline_, now + job_.grace);
      log(LogLevel::info, "{}: the checkpoint in progress ends the run", why);
      Message m;
      m.kind = MsgKind::stop_after;
      m.seq = round_->seq();
      broadcast_(m);
      set_phase(JobPhase::checkpointing, why, now);
    }
    return;
  }
  round_.emplace(next_seq_++, world_size_, stop);
  round_started_ = now;
  if (stop) control_.record_event("stop_requested", why);
  round_why_ = why;
  round_deadline_ = now + job_.grace;
  target_sent_ = false;
  for (std::uint32_t r = 0; r < world_size_; ++r) {
    if (exited_[r]) round_->exited(r);
  }
  log(stop ? LogLevel::info : LogLevel::verbose, "{}: checkpoint round {} ({})", why, round_->seq(),
      stop ? "then requeue" : "then carry on");
  if (stop) set_phase(JobPhase::checkpointing, why, now);
  Message m;
  m.kind = MsgKind::prepare;
  m.seq = round_->seq();
  broadcast_(m);
  if (round_->reports_complete()) round_reports_complete(now);
}

void Coordinator::round_reports_complete(Steady::time_point now) {
  // No rank's program loaded a client API, so none will ever report a checkpoint done.
  // Unless the checkpoint signal stops the programs (--ckpt-signal=TERM: they save what
  // they keep and exit), waiting out the grace time cannot save anything: the run ends.
  if (round_->stop() && round_->no_client_api() && options_.ckpt_signal != SIGTERM &&
      round_->outstanding() > 0) {
    log(LogLevel::info,
        "{}: no rank's program uses the client API, so none can checkpoint now; "
        "ending the run without waiting for the grace time",
        round_why_);
    const std::string why = round_why_;
    round_.reset();
    end_run(RunEnd::stopped, kExitRequeued, why, now);
    return;
  }
  Message m;
  m.kind = MsgKind::target;
  m.seq = round_->seq();
  m.step = round_->target();
  m.flag = round_->stop();
  target_sent_ = true;
  target_sent_at_ = now;
  log(LogLevel::verbose, "checkpoint round {}: every rank checkpoints at step {}", m.seq, m.step);
  broadcast_(m);
  check_round(now);
}

void Coordinator::check_round(Steady::time_point now) {
  if (!round_ || !target_sent_ || !round_->complete()) return;
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(now - target_sent_at_);
  save_time_.record(took);
  run_.ckpt_seconds += std::chrono::duration<double>(now - round_started_).count();
  ++run_.checkpoints;
  const bool stop = round_->stop();
  const std::string why = round_why_;
  log(LogLevel::verbose, "checkpoint round {} complete in {} ms", round_->seq(), took.count());
  round_.reset();
  target_sent_ = false;
  if (job_.ckpt_every) next_periodic_ = next_periodic_round(run_started_, now, *job_.ckpt_every);
  if (stop) end_run(RunEnd::stopped, kExitRequeued, why, now);
}

void Coordinator::hold_failure(std::uint32_t rank, int code, const std::string& why,
                               Steady::time_point now) {
  if (ending_) return;
  const bool primary = code == kExitHung || (code > 128 && code <= 128 + SIGRTMAX);
  if (failure_ && !primary) return;
  const auto until = failure_ ? failure_->until : now + kFailureWindow;
  failure_ = Failure{rank, code, why, until};
  // Nothing comes before a killed or hung rank's program: the run ends now.
  if (primary) end_failed(now);
}

void Coordinator::end_failed(Steady::time_point now) {
  const Failure f = *failure_;
  failure_.reset();
  if (f.rank < nodes_.size() && !nodes_[f.rank].empty()) {
    culprit_ = Culprit{nodes_[f.rank], f.rank,
                       f.code == kExitHung ? CulpritKind::hung : CulpritKind::failed};
  }
  end_run(RunEnd::failed, f.code, f.why, now);
}

void Coordinator::end_run(RunEnd end, int code, const std::string& why, Steady::time_point now) {
  if (ending_) return;
  // Nothing else ends a run whose failure is held: the failure came first.
  if (failure_ && end != RunEnd::failed) {
    end_failed(now);
    return;
  }
  ending_ = true;
  // A failure stops every rank first: the others are probably stuck in a collective
  // with the rank that is gone, and the decision below takes a few RPCs.
  if (end == RunEnd::failed) {
    log(LogLevel::error, "{}: stopping all ranks", why);
    // The launcher hears of the culprit before the step can end (see format_culprit).
    if (job_.under_launcher && culprit_) control_.report_culprit(*culprit_);
    // Under the job-level launcher every rank ends with one code that says "failed",
    // whatever the program's (a program's 75 or 143 must not read as a stop), and the
    // launcher decides: restart guard, nodes, a new step or a requeue.
    // The rank that caused the failure ends first, with its own code, so that the plugin
    // in slurmstepd sees which node was the culprit (its END arrives before the others';
    // a rank's dlrun takes the first END it gets).
    if (job_.under_launcher && job_.mark_culprit && send_to_ && culprit_ &&
        culprit_->kind != CulpritKind::lost) {
      send_to_(culprit_->rank, end_message(kExitCulpritStep, why));
    }
    broadcast_(end_message(job_.under_launcher ? kExitRestartStep : code, why));
    if (job_.under_launcher) {
      control_.report_lost_node(lost_node_);
      set_phase(JobPhase::failed, why, now);
      control_.record_event(tracking_event(JobPhase::failed), why);
      run_.ended = control_.wall_now();
      run_.end = tracking_event(JobPhase::failed);
      save_run_record();
      return;
    }
  }
  RunEnding ending;
  ending.end = end;
  ending.code = code;
  ending.why = why;
  ending.ckpt_at_start = ckpt_at_start_;
  ending.lost_node = lost_node_;
  if (end == RunEnd::failed) ending.verdict = control_.judge_culprit(culprit_);
  const RunOutcome out = control_.conclude_run(
      ending, [&](JobPhase phase, const std::string& detail) { set_phase(phase, detail, now); });
  if (out.newest_ckpt && (!ckpt_step_ || *out.newest_ckpt > *ckpt_step_)) {
    control_.record_checkpoint(*out.newest_ckpt);
    ckpt_step_ = out.newest_ckpt;
    ckpt_time_ = control_.wall_now();
  }
  control_.record_event(tracking_event(out.phase), out.detail.empty() ? why : out.detail);
  run_.ended = control_.wall_now();
  run_.end = tracking_event(out.phase);
  save_run_record();
  if (end == RunEnd::failed) return;
  // The launcher hears of the outcome before the step can end (see format_run_end).
  if (job_.under_launcher) control_.report_run_end(out.exit_code);
  broadcast_(end_message(out.exit_code, why));
}

void Coordinator::tick(Steady::time_point now) {
  if (ending_) return;
  if (failure_ && now >= failure_->until) {
    end_failed(now);
    return;
  }
  if (now >= next_job_refresh_) {
    refresh_job();
    next_job_refresh_ = now + kJobRefresh;
  }
  if (round_ && now >= round_deadline_) {
    if (round_->stop()) {
      log(LogLevel::warning, "{}: {} rank(s) had not checkpointed when the grace time ({}s) ended",
          round_why_, round_->outstanding(), job_.grace.count());
      end_run(RunEnd::stopped, kExitRequeued, round_why_, now);
      return;
    }
    log(LogLevel::warning,
        "checkpoint round {} did not finish within the grace time ({}s); carrying on",
        round_->seq(), job_.grace.count());
    round_.reset();
    target_sent_ = false;
    if (job_.ckpt_every) next_periodic_ = next_periodic_round(run_started_, now, *job_.ckpt_every);
  }
  // The deadline only makes sense when the job can resume from what it saves.
  if (!deadline_fired_ && !job_.ckpt_dir.empty() && job_info_) {
    const auto when = deadline_checkpoint_time(
        job_info_->end, save_time_.value(),
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.deadline_margin),
        job_info_->preempted_at);
    const WallClock::time_point wall = control_.wall_now();
    if (when && wall >= *when) {
      deadline_fired_ = true;
      want(true,
           fmt::format(
               "deadline (the job ends in {}s; a checkpoint takes about {}s)",
               std::chrono::duration_cast<std::chrono::seconds>(*job_info_->end - wall).count(),
               std::chrono::duration_cast<std::chrono::seconds>(save_time_.value()).count()),
           now);
    }
  }
  check_idle(now);
  if (ending_) return;
  if (next_periodic_ && now >= *next_periodic_ && !round_) {
    next_periodic_.reset();
    want(false, "periodic checkpoint (--dl-ckpt-every)", now);
  }
  const std::int64_t done = control_.progress().done_step;
  if (done >= 0 && (!ckpt_step_ || done > *ckpt_step_)) {
    control_.record_checkpoint(done);
    ckpt_step_ = done;
    ckpt_time_ = control_.wall_now();
  }
  if (now >= next_status_) {
    update_status(now, false);
    save_run_record();
    record_gpu_metrics(now);
    next_status_ = now + options_.status_interval;
  }
}

void Coordinator::record_gpu_metrics(Steady::time_point now) {
  const auto g = gpu_.figures(now);
  const std::int64_t step = control_.progress().step;
  if (!g || step < 0) return;
  control_.record_metrics(step, {{"gpu_util", g->util},
                                 {"gpu_mem_gib", static_cast<double>(g->mem_used) / (1u << 30)}});
}

void Coordinator::check_idle(Steady::time_point now) {
  const auto g = gpu_.figures(now);
  const bool idle = g && g->idle.has_value();
  if (idle == idle_flagged_) return;
  idle_flagged_ = idle;
  if (!idle) {
    log(LogLevel::info, "the job's GPUs are busy again");
    return;
  }
  log(LogLevel::warning, "every GPU of the job has been below {}% for {}: they sit idle",
      options_.gpu_idle->below, format_age(*g->idle));
  if (!options_.requeue_when_idle || idle_requeued_) return;
  // A preemptible job gives its GPUs back, checkpointed first; only with a checkpoint
  // directory to resume from, so that no work is lost.
  if (!job_.preemptible || job_.ckpt_dir.empty()) {
    log(LogLevel::info, "--gpu-idle-action=requeue: the job is not {}, so it keeps its GPUs",
        job_.preemptible ? "checkpointed" : "--dl-preemptible");
    return;
  }
  idle_requeued_ = true;
  want(true,
       fmt::format("every GPU below {}% for {} (--gpu-idle-action=requeue)",
                   options_.gpu_idle->below, format_age(options_.gpu_idle->after)),
       now);
}

Coordinator::Steady::time_point Coordinator::next_wakeup(Steady::time_point now) const {
  auto next = std::min(next_status_, next_job_refresh_);
  if (round_) next = std::min(next, round_deadline_);
  if (next_periodic_) next = std::min(next, *next_periodic_);
  if (failure_) next = std::min(next, failure_->until);
  // The deadline is wall-clock time; a second's resolution is plenty against margins of
  // tens of seconds.
  return std::min(next, now + 1s);
}

void Coordinator::set_phase(JobPhase phase, std::string detail, Steady::time_point now) {
  phase_ = phase;
  phase_detail_ = std::move(detail);
  update_status(now, true);
}

void Coordinator::update_status(Steady::time_point now, bool urgent) {
  Status s;
  s.phase = phase_;
  s.detail = phase_detail_;
  const ProgramProgress p = control_.progress();
  if (p.step >= 0) s.step = p.step;
  if (ckpt_step_) {
    s.ckpt_step = ckpt_step_;
    s.ckpt_age = std::chrono::duration_cast<std::chrono::seconds>(control_.wall_now() - ckpt_time_);
  }
  s.gpu = gpu_.figures(now);
  if (job_.restart_count > 0) s.restarts = job_.restart_count;
  if (p.metrics && !p.metrics->second.empty()) {
    s.metrics = p.metrics->second;
    s.metrics_step = p.metrics->first;
  }
  const std::string text = format_status(s);
  if (!limiter_.allow(now, text, urgent)) return;
  log(LogLevel::info, "{}", text);
  if (!job_.job || !job_info_ || job_.comment_frozen || !control_.status_comments()) return;
  try {
    if (!control_.set_comment(*job_.job, merge_comment(comment_prefix_, text))) {
      log(LogLevel::verbose, "the job has ended: its comment stays as it is");
    }
  } catch (const std::exception& e) {
    log(LogLevel::warning, "{}", e.what());
  }
}

}  // namespace dl
