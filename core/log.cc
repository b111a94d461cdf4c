#include "core/log.h"

#include <cstdio>
#include <mutex>

namespace dl {
namespace {

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::error: return "error";
    case LogLevel::warning: return "warning";
    case LogLevel::info: return "info";
    case LogLevel::verbose: return "verbose";
    case LogLevel::debug: return "debug";
  }
  return "?";
}

struct SinkState {
  std::mutex mutex;
  LogSink sink;
};

SinkState& state() {
  // Leaked on purpose: plugins and tools may log from destructors that run after
  // function-local statics are gone.
  static SinkState* s = new SinkState;
  return *s;
}

}  // namespace

void set_log_sink(LogSink sink) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().sink = std::move(sink);
}

void log_message(LogLevel level, std::string_view message) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().sink) {
    state().sink(level, message);
  } else if (level <= LogLevel::info) {
    std::fprintf(stderr, "dl: %s: %.*s\n", level_name(level), static_cast<int>(message.size()),
                 message.data());
  }
}

}  // namespace dl
