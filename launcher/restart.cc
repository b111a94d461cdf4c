#include "launcher/restart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

#include "core/error.h"
#include "core/parse.h"

namespace dl {

namespace {

constexpr std::size_t kMaxCulprits = 8;

std::string_view kind_name(CulpritKind k) {
  switch (k) {
    case CulpritKind::hung: return "hung";
    case CulpritKind::lost: return "lost";
    case CulpritKind::failed: break;
  }
  return "failed";
}

std::optional<CulpritKind> kind_from(std::string_view name) {
  if (name == "failed") return CulpritKind::failed;
  if (name == "hung") return CulpritKind::hung;
  if (name == "lost") return CulpritKind::lost;
  return std::nullopt;
}

}  // namespace

bool valid_node_name(std::string_view node) {
  if (node.empty() || node.size() > 255) return false;
  for (const char c : node) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

std::string encode_culprit(const Culprit& c) {
  if (c.node.empty()) return "-";
  return fmt::format("{}/{}/{}", c.node, c.rank, kind_name(c.kind));
}

std::optional<Culprit> decode_culprit(std::string_view text) {
  Culprit c;
  if (text == "-") return c;
  const std::size_t a = text.find('/');
  const std::size_t b = a == std::string_view::npos ? a : text.find('/', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  const auto kind = kind_from(text.substr(b + 1));
  if (!kind || !valid_node_name(text.substr(0, a))) return std::nullopt;
  try {
    c.rank = static_cast<std::uint32_t>(
        parse_uint("rank", text.substr(a + 1, b - a - 1), 0, UINT32_MAX));
  } catch (const InputError&) {
    return std::nullopt;
  }
  c.node = std::string(text.substr(0, a));
  c.kind = *kind;
  return c;
}

std::string describe_culprit(const Culprit& c) {
  if (c.node.empty()) return "an unknown cause";
  const std::string_view what = c.kind == CulpritKind::lost ? "was lost" : kind_name(c.kind);
  return fmt::format("rank {} on {} {}", c.rank, c.node, what);
}

std::string encode_history(const RestartHistory& h) {
  std::string text = fmt::format("failures={} stalled={}", h.failures, h.stalled);
  if (h.ckpt) text += fmt::format(" ckpt={}", *h.ckpt);
  if (!h.culprits.empty()) {
    text += " culprits=";
    for (std::size_t i = 0; i < h.culprits.size(); ++i) {
      if (i > 0) text += ',';
      text += encode_culprit(h.culprits[i]);
    }
  }
  return text + "\n";
}

RestartHistory decode_history(std::string_view text) {
  const auto fail = [&] {
    return InputError(
        fmt::format("restart history '{}': expected 'failures=N stalled=N [ckpt=N] "
                    "[culprits=NODE/RANK/KIND,...]'",
                    text));
  };
  std::string_view rest = text;
  if (!rest.empty() && rest.back() == '\n') rest.remove_suffix(1);
  // Space-separated KEY=VALUE fields: failures and stalled first, then the optional ones.
  std::vector<std::string_view> fields;
  while (!rest.empty()) {
    const std::size_t space = rest.find(' ');
    fields.push_back(rest.substr(0, space));
    rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
  }
  const auto value = [&](std::string_view field, std::string_view key) -> std::string_view {
    if (field.size() <= key.size() || field.substr(0, key.size()) != key ||
        field[key.size()] != '=') {
      throw fail();
    }
    return field.substr(key.size() + 1);
  };
  if (fields.size() < 2 || fields.size() > 4) throw fail();
  RestartHistory h;
  try {
    h.failures = static_cast<std::uint32_t>(
        parse_uint("failures", value(fields[0], "failures"), 0, 1u << 30));
    h.stalled =
        static_cast<std::uint32_t>(parse_uint("stalled", value(fields[1], "stalled"), 0, 1u << 30));
    std::size_t i = 2;
    if (i < fields.size() && fields[i].substr(0, 5) == "ckpt=") {
      h.ckpt =
          static_cast<std::int64_t>(parse_uint("ckpt", value(fields[i], "ckpt"), 0, INT64_MAX));
      ++i;
    }
    if (i < fields.size()) {
      std::string_view list = value(fields[i], "culprits");
      ++i;
      while (!list.empty()) {
        const std::size_t comma = list.find(',');
        const auto c = decode_culprit(list.substr(0, comma));
        if (!c || h.culprits.size() >= kMaxCulprits) throw fail();
        h.culprits.push_back(*c);
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      }
      if (h.culprits.empty()) throw fail();
    }
    if (i != fields.size()) throw fail();
  } catch (const InputError&) {
    throw fail();
  }
  return h;
}

CulpritVerdict judge_culprit(const std::vector<Culprit>& recent,
                             const std::optional<Culprit>& now) {
  CulpritVerdict v;
  v.recent = recent;
  v.recent.push_back(now.value_or(Culprit{}));
  while (v.recent.size() > kCulpritRepeats) v.recent.erase(v.recent.begin());
  const std::string& node = v.recent.back().node;
  const bool same = !node.empty() && v.recent.size() == kCulpritRepeats &&
                    std::all_of(v.recent.begin(), v.recent.end(),
                                [&](const Culprit& c) { return c.node == node; });
  if (!same) {
    // The next failure needs only the newest ones.
    while (v.recent.size() >= kCulpritRepeats) v.recent.erase(v.recent.begin());
    if (v.recent.size() == 1 && v.recent.front().node.empty()) v.recent.clear();
    return v;
  }
  std::string evidence;
  for (const Culprit& c : v.recent) {
    if (!evidence.empty()) evidence += "; ";
    evidence += describe_culprit(c);
  }
  v.exclude = node;
  v.why = fmt::format("node {} caused the last {} failures ({}); excluded", node,
                      kCulpritRepeats == 2 ? std::string("two") : std::to_string(kCulpritRepeats),
                      evidence);
  v.recent.clear();
  return v;
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
