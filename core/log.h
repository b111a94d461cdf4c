// One logging sink for the whole suite. Adapters install a sink that maps the levels
// to their host (slurm_error/info/verbose/debug in plugins, stderr with a
// "[rank N@host]" prefix in tools); the core only ever calls dl::log().
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string_view>

namespace dl {

enum class LogLevel { error, warning, info, verbose, debug };

using LogSink = std::function<void(LogLevel, std::string_view)>;

// Replaces the sink; an empty function restores the default (stderr, info and above).
void set_log_sink(LogSink sink);

void log_message(LogLevel level, std::string_view message);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  log_message(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace dl
