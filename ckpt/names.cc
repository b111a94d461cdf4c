#include "ckpt/names.h"

#include <fmt/format.h>

#include <ctime>

#include "core/error.h"

namespace dl::ckpt {
namespace {

constexpr std::string_view kStepPrefix = "step-";
constexpr std::string_view kStagingPrefix = ".tmp-";
constexpr std::string_view kDeletingPrefix = ".del-";
constexpr std::size_t kMaxTensorName = 1024;

bool is_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '+' || c == '-';
}

// Why a single path component is invalid, or "" when it is fine.
std::string component_problem(std::string_view c) {
  if (c.empty()) return "has an empty component (leading, trailing or double '/')";
  if (c == "." || c == "..") return "has a '.' or '..' component";
  for (char ch : c) {
    if (!is_name_char(ch)) {
      return fmt::format(
          "contains {:?}; allowed are letters, digits and _ . : + - (and / "
          "between components)",
          std::string(1, ch));
    }
  }
  return "";
}

std::string tensor_name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxTensorName) {
    return fmt::format("is longer than {} characters", kMaxTensorName);
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = name.find('/', start);
    const std::string_view part = name.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (std::string p = component_problem(part); !p.empty()) return p;
    if (slash == std::string_view::npos) return "";
    start = slash + 1;
  }
}

std::string rng_name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > 255) return "is longer than 255 characters";
  if (name.find('/') != std::string_view::npos) return "contains '/'";
  return component_problem(name);
}

}  // namespace

std::string step_dir_name(std::uint64_t step) { return fmt::format("step-{:09}", step); }

std::optional<std::uint64_t> parse_step_dir_name(std::string_view name) {
  if (name.substr(0, kStepPrefix.size()) != kStepPrefix) return std::nullopt;
  const std::string_view digits = name.substr(kStepPrefix.size());
  if (!is_digits(digits) || digits.size() > 20) return std::nullopt;
  std::uint64_t step = 0;
  for (char c : digits) {
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (step > (UINT64_MAX - d) / 10) return std::nullopt;
    step = step * 10 + d;
  }
  if (step_dir_name(step) != name) return std::nullopt;
  return step;
}

std::string shard_file_name(unsigned rank, unsigned world_size) {
  return fmt::format("shard-{:05}-of-{:05}.h5", rank, world_size);
}

std::string fragment_file_name(unsigned rank, unsigned world_size) {
  return fmt::format("shard-{:05}-of-{:05}.json", rank, world_size);
}

std::string staging_dir_name(std::uint64_t step, std::string_view run_id) {
  return fmt::format("{}{}.{}", kStagingPrefix, step_dir_name(step), run_id);
}

std::optional<StagingName> parse_staging_dir_name(std::string_view name) {
  if (name.substr(0, kStagingPrefix.size()) != kStagingPrefix) return std::nullopt;
  name.remove_prefix(kStagingPrefix.size());
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const auto step = parse_step_dir_name(name.substr(0, dot));
  const std::string_view run_id = name.substr(dot + 1);
  if (!step || run_id.empty()) return std::nullopt;
  return StagingName{*step, std::string(run_id)};
}

std::string deleting_dir_name(std::uint64_t step, std::string_view token) {
  return fmt::format("{}{}.{}", kDeletingPrefix, step_dir_name(step), token);
}

bool is_deleting_dir_name(std::string_view name) {
  return name.size() > kDeletingPrefix.size() &&
         name.substr(0, kDeletingPrefix.size()) == kDeletingPrefix;
}

void validate_tensor_name(std::string_view name) {
  if (std::string p = tensor_name_problem(name); !p.empty()) {
    throw InputError(fmt::format("tensor name {:?} {}", std::string(name), p));
  }
}

void validate_rng_name(std::string_view name) {
  if (std::string p = rng_name_problem(name); !p.empty()) {
    throw InputError(fmt::format("RNG state name {:?} {}", std::string(name), p));
  }
}

void validate_run_id(std::string_view run_id) {
  bool ok = !run_id.empty() && run_id.size() <= 64;
  for (char c : run_id) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == '-');
  }
  if (!ok) {
    throw InputError(
        fmt::format("checkpoint run id {:?}: expected 1 to 64 characters of letters, digits, _ . -",
                    std::string(run_id)));
  }
}

bool is_valid_tensor_name(std::string_view name) { return tensor_name_problem(name).empty(); }

bool is_valid_rng_name(std::string_view name) { return rng_name_problem(name).empty(); }

std::string format_utc(std::int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return "?";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace dl::ckpt
