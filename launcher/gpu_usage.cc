#include "launcher/gpu_usage.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "core/parse.h"
#include "launcher/status.h"

namespace dl {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr double kGiB = 1024.0 * 1024 * 1024;

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    const auto at = text.find(sep);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

std::optional<unsigned> whole(std::string_view text, unsigned max) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  unsigned v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

std::optional<double> decimal(std::string_view text) {
  const auto dot = text.find('.');
  if (dot == std::string_view::npos || text.size() - dot != 2) return std::nullopt;
  const auto i = whole(text.substr(0, dot), 999'999'999);
  const auto f = whole(text.substr(dot + 1), 9);
  if (!i || !f) return std::nullopt;
  return *i + *f / 10.0;
}

std::uint64_t from_gib(double gib) { return static_cast<std::uint64_t>(std::llround(gib * kGiB)); }

}  // namespace

std::vector<unsigned> slurm_gpu_indices(const char* step_gpus, const char* job_gpus) {
  const char* text = step_gpus && *step_gpus ? step_gpus : job_gpus;
  if (!text || !*text) return {};
  std::vector<unsigned> out;
  for (const std::string_view part : split(text, ',')) {
    const auto v = whole(part, 1'000'000);
    if (!v || out.size() == kMaxGpusPerNode) return {};
    out.push_back(*v);
  }
  return out;
}

std::string format_gpu_samples(const std::vector<GpuSample>& samples) {
  std::string out;
  for (std::size_t i = 0; i < samples.size() && i < kMaxGpusPerNode; ++i) {
    const GpuSample& s = samples[i];
    out += fmt::format("{}{}:{}:{}:{}", out.empty() ? "" : " ", s.minor, s.util, s.mem_used / kMiB,
                       s.mem_total / kMiB);
  }
  return out;
}

std::vector<GpuSample> parse_gpu_samples(std::string_view text) {
  std::vector<GpuSample> out;
  if (text.empty()) return out;
  for (const std::string_view entry : split(text, ' ')) {
    const auto f = split(entry, ':');
    const auto bad = [&] {
      return SystemError(fmt::format("not a GPU sample: '{}'", std::string(entry.substr(0, 64))));
    };
    if (f.size() != 4 || out.size() == kMaxGpusPerNode) throw bad();
    const auto minor = whole(f[0], 1'000'000);
    const auto util = whole(f[1], 100);
    const auto used = whole(f[2], 999'999'999);
    const auto total = whole(f[3], 999'999'999);
    if (!minor || !util || !used || !total) throw bad();
    out.push_back({*minor, *util, *used * kMiB, *total * kMiB});
  }
  return out;
}

std::string format_gpu_figures(const GpuFigures& g) {
  std::string out = fmt::format("gpu {}%", g.util);
  if (g.util_avg) out += fmt::format(" (avg {}%)", *g.util_avg);
  out += fmt::format(" {:.1f}/{:.1f} GiB", static_cast<double>(g.mem_used) / kGiB,
                     static_cast<double>(g.mem_total) / kGiB);
  if (g.idle) out += " idle " + format_age(*g.idle);
  return out;
}

std::optional<GpuFigures> parse_gpu_figures(std::string_view text) {
  // gpu N%[ (avg N%)] U/T GiB
  if (text.rfind("gpu ", 0) != 0) return std::nullopt;
  text.remove_prefix(4);
  GpuFigures g;
  auto pct = text.find('%');
  if (pct == std::string_view::npos) return std::nullopt;
  const auto util = whole(text.substr(0, pct), 100);
  if (!util) return std::nullopt;
  g.util = *util;
  text.remove_prefix(pct + 1);
  if (text.rfind(" (avg ", 0) == 0) {
    text.remove_prefix(6);
    pct = text.find("%)");
    if (pct == std::string_view::npos) return std::nullopt;
    g.util_avg = whole(text.substr(0, pct), 100);
    if (!g.util_avg) return std::nullopt;
    text.remove_prefix(pct + 2);
  }
  if (const auto idle = text.rfind(" idle "); idle != std::string_view::npos) {
    g.idle = parse_age(text.substr(idle + 6));
    if (!g.idle) return std::nullopt;
    text = text.substr(0, idle);
  }
  if (text.size() < 5 || text[0] != ' ' || text.substr(text.size() - 4) != " GiB") {
    return std::nullopt;
  }
  const auto mem = split(text.substr(1, text.size() - 5), '/');
  if (mem.size() != 2) return std::nullopt;
  const auto used = decimal(mem[0]);
  const auto total = decimal(mem[1]);
  if (!used || !total) return std::nullopt;
  g.mem_used = from_gib(*used);
  g.mem_total = from_gib(*total);
  return g;
}

std::optional<IdleRule> parse_idle_rule(std::string_view option, std::string_view text) {
  if (text == "off") return std::nullopt;
  const auto bad = [&] {
    return InputError(
        fmt::format("{}={}: expected off or UTIL%:DURATION with UTIL from 1 to 100 "
                    "and DURATION from 10s to 7d, e.g. 5%:30m",
                    option, text));
  };
  const auto colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || text[colon - 1] != '%') throw bad();
  const auto below = whole(text.substr(0, colon - 1), 100);
  if (!below || *below == 0) throw bad();
  IdleRule rule;
  rule.below = *below;
  try {
    rule.after = parse_duration(option, text.substr(colon + 1), std::chrono::seconds(10),
                                std::chrono::hours(7 * 24));
  } catch (const InputError&) {
    throw bad();
  }
  return rule;
}

void GpuUsage::record(const std::string& node, std::vector<GpuSample> samples,
                      Steady::time_point now) {
  for (const GpuSample& s : samples) util_sum_ += s.util;
  util_count_ += samples.size();
  latest_[node] = std::move(samples);
  if (!rule_) return;
  bool idle = true;
  for (const auto& [n, gpus] : latest_) {
    for (const GpuSample& s : gpus) idle = idle && s.util < rule_->below;
  }
  if (!idle) {
    idle_since_.reset();
  } else if (!idle_since_) {
    idle_since_ = now;
  }
}

std::optional<GpuFigures> GpuUsage::figures(Steady::time_point now) const {
  GpuFigures g;
  std::uint64_t util = 0, count = 0;
  for (const auto& [node, samples] : latest_) {
    for (const GpuSample& s : samples) {
      util += s.util;
      g.mem_used += s.mem_used;
      g.mem_total += s.mem_total;
      ++count;
    }
  }
  if (count == 0) return std::nullopt;
  g.util = static_cast<unsigned>((util + count / 2) / count);
  g.util_avg = static_cast<unsigned>(std::lround(util_sum_ / static_cast<double>(util_count_)));
  if (idle_since_ && now - *idle_since_ >= rule_->after) {
    g.idle = std::chrono::duration_cast<std::chrono::seconds>(now - *idle_since_);
  }
  return g;
}

}  // namespace dl
