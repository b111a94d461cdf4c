#include "core/parse.h"

#include <fmt/format.h>

#include <limits>
#include <vector>

#include "core/error.h"

namespace dl {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads the digits at the front of `text`; false on no digits or overflow.
bool take_number(std::string_view& text, std::uint64_t& value) {
  std::size_t i = 0;
  value = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  if (i == 0) return false;
  text.remove_prefix(i);
  return true;
}

}  // namespace

std::uint64_t parse_uint(std::string_view option, std::string_view text, std::uint64_t min,
                         std::uint64_t max) {
  std::string_view rest = text;
  std::uint64_t value = 0;
  if (!take_number(rest, value) || !rest.empty() || value < min || value > max) {
    throw InputError(
        fmt::format("{}={}: expected a whole number from {} to {}", option, text, min, max));
  }
  return value;
}

bool parse_on_off(std::string_view option, std::string_view text) {
  if (text == "on") return true;
  if (text == "off") return false;
  throw InputError(fmt::format("{}={}: expected on or off", option, text));
}

std::chrono::seconds parse_duration(std::string_view option, std::string_view text,
                                    std::chrono::seconds min, std::chrono::seconds max) {
  const auto fail = [&]() {
    return InputError(
        fmt::format("{}={}: expected a duration such as 90s, 30m or 2h, from {} to {}", option,
                    text, format_duration(min), format_duration(max)));
  };
  std::string_view rest = text;
  std::uint64_t total = 0;
  // Units must appear in decreasing order, each at most once ("1h30m", not "30m1h").
  std::uint64_t last_unit = std::numeric_limits<std::uint64_t>::max();
  do {
    std::uint64_t n = 0;
    if (!take_number(rest, n)) throw fail();
    std::uint64_t unit = 1;
    if (!rest.empty()) {
      switch (rest.front()) {
        case 'd': unit = 86400; break;
        case 'h': unit = 3600; break;
        case 'm': unit = 60; break;
        case 's': unit = 1; break;
        default: throw fail();
      }
      rest.remove_prefix(1);
    } else if (last_unit != std::numeric_limits<std::uint64_t>::max()) {
      throw fail();  // "1h30" is ambiguous
    }
    if (unit >= last_unit) throw fail();
    last_unit = unit;
    const std::uint64_t limit = static_cast<std::uint64_t>(max.count());
    if (n > limit / unit || total + n * unit > limit) throw fail();
    total += n * unit;
  } while (!rest.empty());
  if (total < static_cast<std::uint64_t>(min.count())) throw fail();
  return std::chrono::seconds(static_cast<std::chrono::seconds::rep>(total));
}

std::string format_duration(std::chrono::seconds d) {
  auto s = d.count();
  if (s <= 0) return "0s";
  std::string out;
  for (const auto& [unit, suffix] : {std::pair{86400L, 'd'}, {3600L, 'h'}, {60L, 'm'}, {1L, 's'}}) {
    if (s >= unit) {
      out += fmt::format("{}{}", s / unit, suffix);
      s %= unit;
    }
  }
  return out;
}

std::vector<std::string_view> path_components(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    const std::size_t start = i;
    while (i < path.size() && path[i] != '/') ++i;
    if (i > start) parts.push_back(path.substr(start, i - start));
  }
  return parts;
}

}  // namespace dl
