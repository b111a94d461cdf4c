#include "launcher/ckpt_module.h"

#include <dl/ckpt.h>

#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "ckpt/manifest.h"
#include "core/log.h"

namespace {

void copy_out(const std::string& text, char* out, std::size_t size) {
  if (size == 0) return;
  const std::size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

extern "C" int dlrun_ckpt_newest(const char* dir, int verify, dlrun_ckpt_log_fn log, char* path,
                                 std::size_t path_size, std::int64_t* step,
                                 std::int64_t* written_unix, char* writer_job,
                                 std::size_t writer_job_size, char* writer, std::size_t writer_size,
                                 char* error, std::size_t error_size) {
  // No exception crosses into dlrun.
  try {
    if (log) {
      dl::set_log_sink([log](dl::LogLevel level, std::string_view message) {
        log(static_cast<int>(level), std::string(message).c_str());
      });
    }
    const auto level = static_cast<dl::ckpt::Verify>(verify);
    const auto found = dl::ckpt::latest_valid(dir, level);
    if (!found) return 0;
    const dl::ckpt::Reader reader = dl::ckpt::Reader::open(*found, dl::ckpt::Verify::quick);
    copy_out(*found, path, path_size);
    *step = static_cast<std::int64_t>(reader.metadata().step);
    *written_unix = reader.created_unix();
    const auto w = reader.writer();
    copy_out(w ? w->job_key() : std::string(), writer_job, writer_job_size);
    copy_out(dl::ckpt::describe_writer(w), writer, writer_size);
    return 1;
  } catch (const std::exception& e) {
    copy_out(e.what(), error, error_size);
    return -1;
  } catch (...) {
    copy_out("unknown error in the checkpoint library", error, error_size);
    return -1;
  }
}
