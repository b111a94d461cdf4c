#include "launcher/jobs_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>

#include "core/printable.h"

namespace dl {
namespace {

// GiB with the one decimal the status line has.
double gib(std::uint64_t bytes) {
  return std::round(static_cast<double>(bytes) / (1024.0 * 1024 * 1024) * 10) / 10;
}

constexpr std::string_view kSeparator = " | ";

std::optional<std::int64_t> leading_number(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n]))) ++n;
  if (n == 0 || n > 18) return std::nullopt;
  return std::stoll(std::string(s.substr(0, n)));
}

std::optional<JobPhase> phase_from(std::string_view word) {
  static const std::pair<std::string_view, JobPhase> kPhases[] = {
      {"RUNNING", JobPhase::running},
      {"CHECKPOINTING", JobPhase::checkpointing},
      {"RESTARTING", JobPhase::restarting},
      {"REQUEUED", JobPhase::requeued},
      {"HELD", JobPhase::held},
      {"COMPLETED", JobPhase::completed},
      {"FAILED", JobPhase::failed},
      {"STOPPED", JobPhase::stopped}};
  for (const auto& [name, phase] : kPhases) {
    if (word == name) return phase;
  }
  return std::nullopt;
}

std::string phase_word(JobPhase p) {
  Status s;
  s.phase = p;
  return format_status(s);
}

enum class Zone { local, utc };

std::string format_time(SystemTime t, const char* format, Zone zone) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  if (zone == Zone::utc) {
    gmtime_r(&tt, &tm);
  } else {
    localtime_r(&tt, &tm);
  }
  char buf[32];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

std::string local_clock(SystemTime t) { return format_time(t, "%H:%M", Zone::local); }
std::string iso_utc(SystemTime t) { return format_time(t, "%Y-%m-%dT%H:%M:%SZ", Zone::utc); }

std::chrono::seconds whole_seconds(SystemTime::duration d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d);
}

}  // namespace

bool is_dl_comment(std::string_view comment) {
  return comment.substr(0, 4) == "dl: " || comment.substr(0, 5) == "dl | " || comment == "dl";
}

std::uint32_t restarts_of(const JobRow& row) {
  const auto s = parse_status(row.comment);
  return s && s->restarts ? std::max(row.requeues, *s->restarts) : row.requeues;
}

std::string shape_of(std::string_view comment) {
  const std::string prefix = comment_prefix(comment);
  if (prefix.rfind("dl: ", 0) != 0) return "";
  return prefix.substr(4);
}

std::optional<Status> parse_status(std::string_view comment) {
  const auto sep = comment.find(kSeparator);
  if (sep == std::string_view::npos) return std::nullopt;
  std::string_view text = comment.substr(sep + kSeparator.size());
  Status s;
  if (const auto colon = text.find(": "); colon != std::string_view::npos) {
    s.detail = std::string(text.substr(colon + 2));
    text = text.substr(0, colon);
  }
  // PHASE[ step N][, ckpt N (AGE ago) | , no checkpoint yet][, gpu FIGURES][, restarts N]
  // [, METRICS[ (step M)]]
  const auto first_end = text.find(", ");
  std::string_view head = text.substr(0, first_end);
  const auto space = head.find(' ');
  const auto phase = phase_from(head.substr(0, space));
  if (!phase) return std::nullopt;
  s.phase = *phase;
  if (space != std::string_view::npos && head.substr(space + 1, 5) == "step ") {
    s.step = leading_number(head.substr(space + 6));
  }
  std::string_view rest =
      first_end == std::string_view::npos ? std::string_view() : text.substr(first_end + 2);
  if (rest.rfind("ckpt ", 0) == 0) {
    const auto end = rest.find(", ");
    const std::string_view ckpt =
        rest.substr(5, end == std::string_view::npos ? rest.npos : end - 5);
    s.ckpt_step = leading_number(ckpt);
    if (const auto open = ckpt.find(" ("); open != std::string_view::npos) {
      const auto close = ckpt.find(" ago)", open);
      if (close != std::string_view::npos)
        s.ckpt_age = parse_age(ckpt.substr(open + 2, close - open - 2));
    }
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 2);
  } else if (rest.rfind("no checkpoint yet", 0) == 0) {
    rest = rest.size() > 19 ? rest.substr(19) : std::string_view();
  }
  if (rest.rfind("gpu ", 0) == 0) {
    const auto end = rest.find(", ");
    s.gpu = parse_gpu_figures(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 2);
  }
  if (rest.rfind("restarts ", 0) == 0) {
    const auto end = rest.find(", ");
    const auto n = leading_number(rest.substr(9, end == rest.npos ? rest.npos : end - 9));
    if (n && *n <= UINT32_MAX) s.restarts = static_cast<std::uint32_t>(*n);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 2);
  }
  if (!rest.empty()) {
    std::string_view metrics = rest;
    if (metrics.size() > 1 && metrics.back() == ')') {
      if (const auto open = metrics.rfind(" (step "); open != std::string_view::npos) {
        s.metrics_step = leading_number(metrics.substr(open + 7));
        metrics = metrics.substr(0, open);
      }
    }
    s.metrics = std::string(metrics);
    if (!s.metrics_step) s.metrics_step = s.step;
  }
  return s;
}

std::string describe_start(const JobRow& row, SystemTime now) {
  if (row.state == "PENDING") {
    if (!row.start) return "unknown";
    const auto in = whole_seconds(*row.start - now);
    if (in.count() <= 0) return fmt::format("now (at {})", local_clock(*row.start));
    return fmt::format("in {} (at {})", format_age(in), local_clock(*row.start));
  }
  const bool active = row.state == "RUNNING" || row.state == "SUSPENDED" ||
                      row.state == "COMPLETING" || row.state == "CONFIGURING";
  if (active && row.start) {
    return fmt::format("started {} ago", format_age(whole_seconds(now - *row.start)));
  }
  return "";
}

nlohmann::json to_json(const std::vector<JobRow>& rows, SystemTime now) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json j = {{"id", r.id},
                        {"name", r.name},
                        {"user", r.user},
                        {"partition", r.partition},
                        {"state", r.state},
                        {"reason", r.reason.empty() ? nlohmann::json() : nlohmann::json(r.reason)},
                        {"shape", shape_of(r.comment)},
                        {"restarts", restarts_of(r)},
                        {"requeues", r.requeues},
                        {"nodes", r.nodes},
                        {"comment", r.comment}};
    j["submit_time"] = r.submit ? nlohmann::json(iso_utc(*r.submit)) : nlohmann::json();
    const bool pending = r.state == "PENDING";
    j["start_time"] = r.start && !pending ? nlohmann::json(iso_utc(*r.start)) : nlohmann::json();
    j["expected_start"] = r.start && pending ? nlohmann::json(iso_utc(*r.start)) : nlohmann::json();
    j["expected_start_in_s"] =
        r.start && pending
            ? nlohmann::json(std::max<long long>(0, whole_seconds(*r.start - now).count()))
            : nlohmann::json();
    nlohmann::json status;
    if (const auto s = parse_status(r.comment)) {
      status = {
          {"phase", phase_word(s->phase)},
          {"step", s->step ? nlohmann::json(*s->step) : nlohmann::json()},
          {"ckpt_step", s->ckpt_step ? nlohmann::json(*s->ckpt_step) : nlohmann::json()},
          {"gpu",
           s->gpu ? nlohmann::json{{"util", s->gpu->util},
                                   {"util_avg", s->gpu->util_avg ? nlohmann::json(*s->gpu->util_avg)
                                                                 : nlohmann::json()},
                                   {"mem_used_gib", gib(s->gpu->mem_used)},
                                   {"mem_total_gib", gib(s->gpu->mem_total)},
                                   {"idle_s", s->gpu->idle ? nlohmann::json(s->gpu->idle->count())
                                                           : nlohmann::json()}}
                  : nlohmann::json()},
          {"metrics", s->metrics},
          {"metrics_step", s->metrics_step ? nlohmann::json(*s->metrics_step) : nlohmann::json()},
          {"detail", s->detail}};
    }
    j["status"] = status;
    jobs.push_back(std::move(j));
  }
  return {{"jobs", jobs}};
}

std::string format_table(const std::vector<JobRow>& rows, SystemTime now) {
  struct Line {
    std::string id, name, state, shape, step, ckpt, gpu, metrics, restarts, start;
  };
  std::vector<Line> lines;
  lines.push_back(
      {"JOBID", "NAME", "STATE", "SHAPE", "STEP", "CKPT", "GPU", "METRICS", "RESTARTS", "START"});
  for (const auto& r : rows) {
    const auto s = parse_status(r.comment);
    Line l;
    l.id = r.id;
    l.name = r.name;
    l.state = r.state;
    if (!r.reason.empty() && r.reason != "None") l.state += " (" + r.reason + ")";
    l.shape = shape_of(r.comment);
    if (l.shape.empty()) l.shape = "-";
    l.step = s && s->step ? std::to_string(*s->step) : "-";
    l.ckpt = s && s->ckpt_step ? std::to_string(*s->ckpt_step) : "-";
    if (s && s->ckpt_age) l.ckpt += " (" + format_age(*s->ckpt_age) + " ago)";
    l.gpu = s && s->gpu ? format_gpu_figures(*s->gpu).substr(4) : "-";
    l.metrics = s && !s->metrics.empty() ? s->metrics : "-";
    l.restarts = std::to_string(restarts_of(r));
    l.start = describe_start(r, now);
    if (l.start.empty()) l.start = "-";
    lines.push_back(std::move(l));
  }
  // Job names and comments are other users' text (dl-jobs -a): no control character of
  // theirs reaches the terminal.
  for (auto& l : lines) {
    for (std::string* cell : {&l.id, &l.name, &l.state, &l.shape, &l.step, &l.ckpt, &l.gpu,
                              &l.metrics, &l.restarts, &l.start}) {
      *cell = printable(*cell);
    }
  }
  std::size_t w[9] = {};
  for (const auto& l : lines) {
    const std::string* cols[9] = {&l.id,   &l.name, &l.state,   &l.shape,   &l.step,
                                  &l.ckpt, &l.gpu,  &l.metrics, &l.restarts};
    for (int c = 0; c < 9; ++c) w[c] = std::max(w[c], cols[c]->size());
  }
  std::string out;
  for (const auto& l : lines) {
    out +=
        fmt::format("{:<{}}  {:<{}}  {:<{}}  {:<{}}  {:>{}}  {:<{}}  {:<{}}  {:<{}}  {:>{}}  {}\n",
                    l.id, w[0], l.name, w[1], l.state, w[2], l.shape, w[3], l.step, w[4], l.ckpt,
                    w[5], l.gpu, w[6], l.metrics, w[7], l.restarts, w[8], l.start);
  }
  return out;
}

}  // namespace dl
