#include "launcher/status.h"

#include <fmt/format.h>

namespace dl {
namespace {

const char* phase_name(JobPhase p) {
  switch (p) {
    case JobPhase::running: return "RUNNING";
    case JobPhase::checkpointing: return "CHECKPOINTING";
    case JobPhase::restarting: return "RESTARTING";
    case JobPhase::requeued: return "REQUEUED";
    case JobPhase::held: return "HELD";
    case JobPhase::completed: return "COMPLETED";
    case JobPhase::failed: return "FAILED";
    case JobPhase::stopped: return "STOPPED";
  }
  return "RUNNING";
}

constexpr std::size_t kMaxMetrics = 120;

}  // namespace

const char* tracking_event(JobPhase phase) {
  switch (phase) {
    case JobPhase::running: return "run_started";
    case JobPhase::checkpointing: return "stop_requested";
    case JobPhase::restarting: return "restarting";
    case JobPhase::requeued: return "requeued";
    case JobPhase::held: return "held";
    case JobPhase::completed: return "completed";
    case JobPhase::failed: return "failed";
    case JobPhase::stopped: return "stopped";
  }
  return "stopped";
}

std::string format_age(std::chrono::seconds age) {
  const auto s = std::max<long long>(age.count(), 0);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m", s / 60);
  if (s < 86400) return fmt::format("{}h", s / 3600);
  return fmt::format("{}d", s / 86400);
}

std::string format_status(const Status& s) {
  std::string out = phase_name(s.phase);
  if (s.step) out += fmt::format(" step {}", *s.step);
  if (s.ckpt_step) {
    out += fmt::format(", ckpt {}", *s.ckpt_step);
    if (s.ckpt_age) out += fmt::format(" ({} ago)", format_age(*s.ckpt_age));
  } else if (s.step) {
    out += ", no checkpoint yet";
  }
  if (s.gpu) out += ", " + format_gpu_figures(*s.gpu);
  if (s.restarts) out += fmt::format(", restarts {}", *s.restarts);
  if (!s.metrics.empty()) {
    // The comment is for people glancing at squeue; the full metrics are in the log.
    out += ", ";
    out += s.metrics.size() <= kMaxMetrics ? s.metrics : s.metrics.substr(0, kMaxMetrics) + "...";
    if (s.metrics_step && s.metrics_step != s.step)
      out += fmt::format(" (step {})", *s.metrics_step);
  }
  if (!s.detail.empty()) out += ": " + s.detail;
  return out;
}

std::optional<std::chrono::seconds> parse_age(std::string_view text) {
  std::size_t n = 0;
  while (n < text.size() && n < 12 && text[n] >= '0' && text[n] <= '9') ++n;
  if (n == 0 || n + 1 != text.size()) return std::nullopt;
  const std::int64_t v = std::stoll(std::string(text.substr(0, n)));
  switch (text[n]) {
    case 's': return std::chrono::seconds(v);
    case 'm': return std::chrono::minutes(v);
    case 'h': return std::chrono::hours(v);
    case 'd': return std::chrono::hours(24 * v);
    default: return std::nullopt;
  }
}

std::string comment_prefix(std::string_view comment) {
  return std::string(comment.substr(0, comment.find(" | ")));
}

std::string merge_comment(std::string_view prefix, std::string_view status) {
  return fmt::format("{} | {}", prefix.empty() ? std::string_view("dl") : prefix, status);
}

bool RateLimiter::allow(Clock::time_point now, const std::string& text, bool urgent) {
  if (text == last_text_) return false;
  if (!urgent && last_ && now - *last_ < interval_) return false;
  last_ = now;
  last_text_ = text;
  return true;
}

}  // namespace dl
