// Strict parsers for user-supplied values. Every failure throws dl::InputError with
// one message naming the option, the value and what is allowed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dl {

// A whole decimal number in [min, max]: no sign, no spaces, no suffix.
// parse_uint("--dl-gpus", "abc", 1, 64) throws
// "--dl-gpus=abc: expected a whole number from 1 to 64".
std::uint64_t parse_uint(std::string_view option, std::string_view text, std::uint64_t min,
                         std::uint64_t max);

// "on" or "off", nothing else: parse_on_off("--status-comment", "no") throws
// "--status-comment=no: expected on or off".
bool parse_on_off(std::string_view option, std::string_view text);

// A duration in [min, max]: a number with an optional unit s, m, h or d ("90s", "30m",
// "2h"), or several such terms ("1h30m"). A bare number means seconds.
std::chrono::seconds parse_duration(std::string_view option, std::string_view text,
                                    std::chrono::seconds min, std::chrono::seconds max);

// The shortest exact form of a duration in the syntax parse_duration accepts:
// 90s -> "90s", 3600s -> "1h", 5400s -> "1h30m", 0s -> "0s".
std::string format_duration(std::chrono::seconds d);

// The non-empty components of a '/'-separated path ("/a//b/" -> {"a", "b"}); views into
// `path`.
std::vector<std::string_view> path_components(std::string_view path);

}  // namespace dl
