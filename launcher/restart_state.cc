#include "launcher/restart_state.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/sysio.h"
#include "launcher/jobs_view.h"

namespace dl {
namespace {

// "failures=N stalled=N\n" with numbers below 2^30 is far shorter.
constexpr std::size_t kMaxHistoryBytes = 4096;

}  // namespace

std::string history_path(const std::string& ckpt_dir, const std::string& job_id) {
  return fmt::format("{}/.dlrun-{}.restarts", ckpt_dir, job_id);
}

RestartHistory read_history(const std::string& path) {
  // Without following a link or blocking, regular files only, and small: a FIFO, a link
  // to /dev/zero or a huge file at this name fails at once instead of hanging or filling
  // the memory of the run that has to decide about the restart.
  std::string text;
  try {
    const sys::Fd dir = sys::open_dir(sys::parent_dir(path));
    if (sys::file_type_at(dir, sys::base_name(path)) == sys::FileType::missing) return {};
    text = sys::read_file_at(dir, sys::base_name(path), kMaxHistoryBytes);
  } catch (const SystemError& e) {
    if (sys::file_type(sys::parent_dir(path)) == sys::FileType::missing) return {};
    throw;
  }
  try {
    return decode_history(text);
  } catch (const InputError& e) {
    throw SystemError(fmt::format("{}: {}", path, e.what()));
  }
}

void write_history(const std::string& path, const RestartHistory& history) {
  // A new temporary file with an unpredictable name, renamed over `path`: nothing planted
  // at either name is written through.
  sys::write_file_durably(path, encode_history(history));
}

void remove_history(const std::string& path) { sys::remove_file(path); }

std::optional<std::int64_t> recorded_checkpoint(const RestartHistory& history,
                                                std::string_view job_comment) {
  std::optional<std::int64_t> step = history.ckpt;
  if (const auto status = parse_status(job_comment); status && status->ckpt_step) {
    if (!step || *status->ckpt_step > *step) step = status->ckpt_step;
  }
  return step;
}

}  // namespace dl
