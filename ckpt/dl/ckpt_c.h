/* dl/ckpt_c.h: a C interface to libdlckpt, for programs and languages that cannot use
 * the C++ API (the Python package slurm_dl.ckpt loads it with ctypes). It writes and
 * reads exactly the checkpoints <dl/ckpt.h> does.
 *
 * Every function returns 0 on success and -1 on failure, with a message naming the
 * path and the reason in `err` (always NUL-terminated when err_len > 0). No function
 * throws or aborts. Handles are not thread-safe; use one per thread. */
#ifndef DL_CKPT_C_H
#define DL_CKPT_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dl_ckpt_saver dl_ckpt_saver;
typedef struct dl_ckpt_reader dl_ckpt_reader;

/* A checkpointer for one rank, configured like dl::ckpt::Options::from_env() (DL_CKPT_DIR,
 * DL_CKPT_KEEP, RANK, WORLD_SIZE, ...); `dir` overrides DL_CKPT_DIR unless NULL. */
int dl_ckpt_saver_new(const char* dir, dl_ckpt_saver** out, char* err, size_t err_len);
void dl_ckpt_saver_free(dl_ckpt_saver* saver);

/* Adds this rank's part of a tensor to the next save: `ndim` dimensions of `shape`,
 * placed at `offset` (NULL: zeros) in `global_shape` (NULL: same as shape). `dtype` is
 * one of f16, bf16, f32, f64, i32, i64, u8. The data must stay valid until the save. */
int dl_ckpt_saver_add_tensor(dl_ckpt_saver* saver, const char* name, const char* dtype,
                             unsigned ndim, const uint64_t* shape, const uint64_t* global_shape,
                             const uint64_t* offset, const void* data, char* err, size_t err_len);
/* Adds this rank's RNG state `name` (bytes, copied). */
int dl_ckpt_saver_add_rng(dl_ckpt_saver* saver, const char* name, const void* data, size_t size,
                          char* err, size_t err_len);
/* Saves step `step` with the tensors and RNG states added since the last save, then
 * forgets them. `meta_json` (NULL: none) is a JSON object with any of "epoch",
 * "data_loader_position" (numbers), "hyperparameters", "user_metadata" (objects) and
 * "metrics" (an object of numbers). With `async` non-zero the call returns once the
 * tensors are copied (see Checkpointer::save_async); dl_ckpt_saver_wait() waits. */
int dl_ckpt_saver_save(dl_ckpt_saver* saver, uint64_t step, const char* meta_json, int async,
                       char* err, size_t err_len);
int dl_ckpt_saver_wait(dl_ckpt_saver* saver, char* err, size_t err_len);

/* The newest checkpoint in `dir` that verifies quickly (dl::ckpt::latest_valid), copied
 * into `path` (empty when there is none). */
int dl_ckpt_latest_valid(const char* dir, char* path, size_t path_len, char* err, size_t err_len);

/* Opens a step directory; every read verifies what it touches. */
int dl_ckpt_reader_open(const char* step_dir, dl_ckpt_reader** out, char* err, size_t err_len);
void dl_ckpt_reader_close(dl_ckpt_reader* reader);
/* The checkpoint's metadata and tensor list as one JSON object: {"step", "epoch",
 * "data_loader_position", "world_size", "hyperparameters", "user_metadata", "metrics",
 * "tensors": [{"name", "dtype", "shape"}]}. Valid until the reader is closed. */
const char* dl_ckpt_reader_info_json(dl_ckpt_reader* reader);
/* Reads the box at `offset` of size `shape` (both NULL: the whole tensor) into `data`. */
int dl_ckpt_reader_read(dl_ckpt_reader* reader, const char* name, const char* dtype, unsigned ndim,
                        const uint64_t* offset, const uint64_t* shape, void* data, char* err,
                        size_t err_len);
/* Rank `rank`'s RNG state `name`: copies up to *size bytes into data (may be NULL) and sets
 * *size to its length; -1 if it does not exist. */
int dl_ckpt_reader_rng(dl_ckpt_reader* reader, unsigned rank, const char* name, void* data,
                       size_t* size, char* err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* DL_CKPT_C_H */
