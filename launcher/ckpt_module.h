// The checkpoint library behind one C function, in a module (dlrun_ckpt.so) that rank 0's
// dlrun loads only when the job has a checkpoint directory: linking libdlckpt, and with
// it HDF5 and its dependencies, into dlrun would add about 5 ms to the start of every
// task, for something one rank needs once.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// Receives the checkpoint library's warnings (e.g. a corrupt newer checkpoint skipped);
// `level` is a dl::LogLevel.
typedef void (*dlrun_ckpt_log_fn)(int level, const char* message);

// The newest checkpoint in `dir` that passes `verify` (0: quick, 1: metadata, 2: full,
// as dl::ckpt::Verify). Returns 1 and fills `path`, `step`, `written_unix`, and
// `writer_job` ("4711", "100_3"; empty when the manifest does not record its writer) and
// `writer` (its description for messages); 0 when there is none; -1 with a message in
// `error` when the lookup itself failed.
int dlrun_ckpt_newest(const char* dir, int verify, dlrun_ckpt_log_fn log, char* path,
                      std::size_t path_size, std::int64_t* step, std::int64_t* written_unix,
                      char* writer_job, std::size_t writer_job_size, char* writer,
                      std::size_t writer_size, char* error, std::size_t error_size);

typedef int (*dlrun_ckpt_newest_fn)(const char*, int, dlrun_ckpt_log_fn, char*, std::size_t,
                                    std::int64_t*, std::int64_t*, char*, std::size_t, char*,
                                    std::size_t, char*, std::size_t);
}
