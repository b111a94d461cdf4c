#include "launcher/restart.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/parse.h"

namespace dl {

std::string encode_history(const RestartHistory& h) {
  if (h.ckpt)
    return fmt::format("failures={} stalled={} ckpt={}\n", h.failures, h.stalled, *h.ckpt);
  return fmt::format("failures={} stalled={}\n", h.failures, h.stalled);
}

RestartHistory decode_history(std::string_view text) {
  const auto fail = [&] {
    return InputError(
        fmt::format("restart history '{}': expected 'failures=N stalled=N [ckpt=N]'", text));
  };
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  constexpr std::string_view kCkpt = " ckpt=";
  std::optional<std::int64_t> ckpt;
  if (const std::size_t at = text.find(kCkpt); at != std::string_view::npos) {
    try {
      ckpt = static_cast<std::int64_t>(
          parse_uint("ckpt", text.substr(at + kCkpt.size()), 0, INT64_MAX));
    } catch (const InputError&) {
      throw fail();
    }
    text = text.substr(0, at);
  }
  constexpr std::string_view kFailures = "failures=";
  constexpr std::string_view kStalled = " stalled=";
  const std::size_t mid = text.find(kStalled);
  if (text.substr(0, kFailures.size()) != kFailures || mid == std::string_view::npos) {
    throw fail();
  }
  RestartHistory h;
  try {
    h.failures = static_cast<std::uint32_t>(
        parse_uint("failures", text.substr(kFailures.size(), mid - kFailures.size()), 0, 1u << 30));
    h.stalled = static_cast<std::uint32_t>(
        parse_uint("stalled", text.substr(mid + kStalled.size()), 0, 1u << 30));
  } catch (const InputError&) {
    throw fail();
  }
  h.ckpt = ckpt;
  return h;
}

RestartDecision decide_restart(const RestartPolicy& policy, const RestartHistory& history,
                               RunEnd end, std::optional<std::int64_t> ckpt_before,
                               std::optional<std::int64_t> ckpt_after) {
  RestartDecision d;
  d.history = history;
  if (ckpt_after) d.history.ckpt = ckpt_after;
  if (end == RunEnd::completed) {
    d.action = RestartAction::finish;
    d.reason = "completed";
    return d;
  }
  const bool advanced = ckpt_after && (!ckpt_before || *ckpt_after > *ckpt_before);
  d.history.stalled = advanced ? 0 : history.stalled + 1;
  const std::string where =
      ckpt_after ? fmt::format("still at step {}", *ckpt_after) : "no checkpoint yet";
  if (end == RunEnd::failed) {
    d.history.failures = history.failures + 1;
    if (d.history.failures > policy.max_restarts) {
      // Held rather than failed: the reason stays in the job's comment and
      // `scontrol release` runs it once more (after a fix of the cause, say).
      d.action = RestartAction::hold;
      d.reason = fmt::format("no restarts left ({} failures, --dl-max-restarts={})",
                             d.history.failures, policy.max_restarts);
      return d;
    }
  }
  // The first run is not a restart: k restarts without progress are k+1 runs.
  if (d.history.stalled > policy.max_stalled_restarts) {
    d.action = RestartAction::hold;
    d.reason =
        fmt::format("no newer checkpoint in {} runs in a row ({})", d.history.stalled, where);
    return d;
  }
  d.action = RestartAction::requeue;
  d.reason = end == RunEnd::failed ? fmt::format("restart {} of {} after a failure",
                                                 d.history.failures, policy.max_restarts)
                                   : "requeued to resume from its checkpoint";
  return d;
}

std::string resume_refusal(const ResumeCandidate& c, CkptDirKind kind, const std::string& own_job,
                           const std::string& dir) {
  if (kind == CkptDirKind::chosen) return "";
  if (!c.writer_job.empty() && c.writer_job == own_job) return "";
  return fmt::format(
      "not resuming step {} in {}: it was written by {}, not by this job ({}); {} is this job's "
      "own checkpoint directory. Starting from step 0. To continue another job's run, submit "
      "with --dl-resume-from=<its job id or checkpoint directory>",
      c.step, c.path, c.writer_job.empty() ? std::string("an unknown job") : c.writer, own_job,
      dir);
}

std::string resume_message(const ResumeCandidate& c) {
  return fmt::format("resuming step {} from {}, written by {}", c.step, c.path,
                     c.writer.empty() ? std::string("an unknown job") : c.writer);
}

std::string missing_checkpoint_warning(std::optional<std::int64_t> recorded, const std::string& job,
                                       const std::string& dir,
                                       std::optional<std::int64_t> own_newest,
                                       std::optional<std::int64_t> resumed) {
  if (!recorded || (resumed && *resumed >= *recorded)) return "";
  return fmt::format(
      "job {} had checkpoint step {} in {} (its restart history or job comment says so), but {} "
      "has {}: {}. The checkpoint root is probably not shared between the nodes (see "
      "spank_dl(8), shared_ckpt_root), or the checkpoint was removed or is unusable",
      job, *recorded, dir, dir,
      own_newest ? fmt::format("only step {}", *own_newest) : std::string("none"),
      resumed ? fmt::format("resuming step {}", *resumed)
              : std::string("starting from step 0, as a new run"));
}

}  // namespace dl
