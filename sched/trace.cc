#include "sched/trace.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <ostream>
#include <unordered_map>

#include "core/error.h"

namespace dl {
namespace {

constexpr const char* kRequired[] = {"job_id", "submit_s", "duration_s", "num_gpu"};
constexpr const char* kOptional[] = {"user", "checkpointable"};
constexpr double kMaxSeconds = 1e12;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const auto comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

class Row {
 public:
  explicit Row(std::size_t line_no) : line_no_(line_no) {}

  InputError error(const std::string& what) const {
    return InputError(fmt::format("line {}: {}", line_no_, what));
  }

  template <typename T>
  T whole(std::string_view name, std::string_view text, T min, T max) const {
    T value{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min ||
        value > max) {
      throw error(
          fmt::format("{}='{}': expected a whole number from {} to {}", name, text, min, max));
    }
    return value;
  }

  double seconds(std::string_view name, std::string_view text, bool zero_ok) const {
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    const bool ok = !text.empty() && ec == std::errc() && end == text.data() + text.size() &&
                    std::isfinite(value) && (zero_ok ? value >= 0 : value > 0) &&
                    value <= kMaxSeconds;
    if (!ok) {
      throw error(fmt::format("{}='{}': expected a number of seconds {} 0 and at most 1e12", name,
                              text, zero_ok ? ">=" : ">"));
    }
    return value;
  }

 private:
  std::size_t line_no_;
};

}  // namespace

std::vector<TraceJob> parse_trace(std::string_view text) {
  std::vector<TraceJob> jobs;
  std::unordered_map<std::string, std::size_t> seen;  // job id -> line
  bool numeric_ids = true;
  // The position of each known column in the header, and how many columns it has.
  enum Col { kJobId, kSubmit, kDuration, kGpus, kUser, kCheckpointable, kCols };
  std::size_t pos[kCols];
  std::size_t columns = 0;
  std::size_t line_no = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    auto nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    auto line = text.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (trim(line).empty()) continue;
    const Row row(line_no);
    if (line.find('\0') != std::string_view::npos) throw row.error("NUL byte in the line");
    const auto fields = fields_of(line);
    if (columns == 0) {
      std::fill(std::begin(pos), std::end(pos), SIZE_MAX);
      for (std::size_t i = 0; i < fields.size(); ++i) {
        for (int c = 0; c < kCols; ++c) {
          const char* name = c < 4 ? kRequired[c] : kOptional[c - 4];
          if (fields[i] != name) continue;
          if (pos[c] != SIZE_MAX) {
            throw row.error(fmt::format("header: column {} appears twice", name));
          }
          pos[c] = i;
        }
      }
      for (int c = 0; c < 4; ++c) {
        if (pos[c] == SIZE_MAX) {
          throw row.error(fmt::format(
              "header '{}': no column {}: expected the columns job_id, submit_s, duration_s and "
              "num_gpu (in any order; user, checkpointable optional; others are ignored)",
              line, kRequired[c]));
        }
      }
      columns = fields.size();
      continue;
    }
    if (fields.size() != columns) {
      throw row.error(fmt::format("{} fields, the header has {}", fields.size(), columns));
    }
    TraceJob job;
    const auto id_text = fields[pos[kJobId]];
    if (id_text.empty()) throw row.error("job_id is empty");
    if (id_text.find('"') != std::string_view::npos) {
      throw row.error(fmt::format("job_id='{}': quotes are not allowed", id_text));
    }
    job.name = std::string(id_text);
    std::uint64_t number = 0;
    const auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), number);
    const bool numeric = ec == std::errc() && end == id_text.data() + id_text.size();
    if (numeric) {
      job.id = number;
    } else {
      numeric_ids = false;
    }
    job.submit_s = row.seconds("submit_s", fields[pos[kSubmit]], true);
    job.duration_s = row.seconds("duration_s", fields[pos[kDuration]], false);
    job.gpus = row.whole<std::uint32_t>("num_gpu", fields[pos[kGpus]], 1, 1u << 20);
    if (pos[kUser] != SIZE_MAX) {
      job.user = std::string(fields[pos[kUser]]);
      if (job.user.find('"') != std::string::npos) {
        throw row.error(fmt::format("user='{}': quotes are not allowed", job.user));
      }
    }
    if (pos[kCheckpointable] != SIZE_MAX) {
      const auto c = fields[pos[kCheckpointable]];
      if (c != "0" && c != "1") {
        throw row.error(fmt::format("checkpointable='{}': expected 0 or 1", c));
      }
      job.checkpointable = c == "1";
    }
    if (const auto [it, fresh] = seen.emplace(numeric ? std::to_string(number) : job.name, line_no);
        !fresh) {
      throw row.error(fmt::format("job_id {} already used on line {}", job.name, it->second));
    }
    jobs.push_back(std::move(job));
  }
  if (columns == 0) {
    throw InputError("line 1: empty trace: expected the header job_id,submit_s,duration_s,num_gpu");
  }
  if (!numeric_ids) {
    for (std::size_t k = 0; k < jobs.size(); ++k) jobs[k].id = k + 1;
  }
  return jobs;
}

void write_trace(std::ostream& out, const std::vector<TraceJob>& jobs) {
  out << "job_id,submit_s,duration_s,num_gpu,user,checkpointable\n";
  for (const auto& j : jobs) {
    fmt::print(out, "{},{},{},{},{},{}\n", j.name.empty() ? std::to_string(j.id) : j.name,
               j.submit_s, j.duration_s, j.gpus, j.user, j.checkpointable ? 1 : 0);
  }
}

}  // namespace dl
