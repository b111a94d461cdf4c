// The C interface of libdlckpt (dl/ckpt_c.h): thin wrappers that turn every exception
// into -1 and a message, so nothing crosses the C boundary.
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"
#include "dl/ckpt.h"
#include "dl/ckpt_c.h"

using dl::ckpt::DType;
using dl::ckpt::Shape;

struct dl_ckpt_saver {
  dl::ckpt::Checkpointer checkpointer;
  dl::ckpt::State state;  // what the next save writes
};

struct dl_ckpt_reader {
  dl::ckpt::Reader reader;
  std::string info;
};

namespace {

void set_error(char* err, std::size_t err_len, const char* message) {
  if (err == nullptr || err_len == 0) return;
  std::strncpy(err, message, err_len - 1);
  err[err_len - 1] = '\0';
}

template <typename Body>
int guarded(char* err, std::size_t err_len, Body&& body) noexcept {
  try {
    body();
    if (err != nullptr && err_len > 0) err[0] = '\0';
    return 0;
  } catch (const std::exception& e) {
    set_error(err, err_len, e.what());
  } catch (...) {
    set_error(err, err_len, "unknown error");
  }
  return -1;
}

DType dtype_of(const char* name) {
  const auto t = dl::ckpt::parse_dtype(name ? name : "");
  if (!t) {
    throw dl::InputError(std::string("dtype '") + (name ? name : "") +
                         "': expected f16, bf16, f32, f64, i32, i64 or u8");
  }
  return *t;
}

Shape shape_of(unsigned ndim, const std::uint64_t* dims) {
  if (dims == nullptr) return {};
  return Shape(dims, dims + ndim);
}

void apply_meta(dl::ckpt::Metadata& meta, const char* meta_json) {
  if (meta_json == nullptr || *meta_json == '\0') return;
  const auto j = nlohmann::json::parse(meta_json);
  if (!j.is_object()) throw dl::InputError("metadata: expected a JSON object");
  if (j.contains("epoch")) meta.epoch = j.at("epoch").get<std::uint64_t>();
  if (j.contains("data_loader_position")) {
    meta.data_loader_position = j.at("data_loader_position").get<std::uint64_t>();
  }
  if (j.contains("hyperparameters")) meta.hyperparameters = j.at("hyperparameters").dump();
  if (j.contains("user_metadata")) meta.user_metadata = j.at("user_metadata").dump();
  if (j.contains("metrics")) meta.metrics = j.at("metrics").get<std::map<std::string, double>>();
}

}  // namespace

extern "C" {

int dl_ckpt_saver_new(const char* dir, dl_ckpt_saver** out, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (out == nullptr) throw dl::InputError("dl_ckpt_saver_new: out is NULL");
    dl::ckpt::Options options = dl::ckpt::Options::from_env(dir ? dir : "");
    *out = new dl_ckpt_saver{dl::ckpt::Checkpointer(std::move(options)), {}};
  });
}

void dl_ckpt_saver_free(dl_ckpt_saver* saver) { delete saver; }

int dl_ckpt_saver_add_tensor(dl_ckpt_saver* saver, const char* name, const char* dtype,
                             unsigned ndim, const uint64_t* shape, const uint64_t* global_shape,
                             const uint64_t* offset, const void* data, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (saver == nullptr || name == nullptr) throw dl::InputError("add_tensor: NULL argument");
    dl::ckpt::TensorRef t;
    t.name = name;
    t.dtype = dtype_of(dtype);
    t.shape = shape_of(ndim, shape);
    t.global_shape = shape_of(ndim, global_shape);
    t.offset = shape_of(ndim, offset);
    t.data = data;
    saver->state.tensors.push_back(std::move(t));
  });
}

int dl_ckpt_saver_add_rng(dl_ckpt_saver* saver, const char* name, const void* data, size_t size,
                          char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (saver == nullptr || name == nullptr || (data == nullptr && size > 0)) {
      throw dl::InputError("add_rng: NULL argument");
    }
    const auto* bytes = static_cast<const std::uint8_t*>(data);
    saver->state.rng_states[name] = std::vector<std::uint8_t>(bytes, bytes + size);
  });
}

int dl_ckpt_saver_save(dl_ckpt_saver* saver, uint64_t step, const char* meta_json, int async,
                       char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (saver == nullptr) throw dl::InputError("save: NULL saver");
    // Whatever happens, the next save starts empty.
    struct Clear {
      dl::ckpt::State& s;
      ~Clear() { s = dl::ckpt::State{}; }
    } clear{saver->state};
    saver->state.meta = dl::ckpt::Metadata{};
    saver->state.meta.step = step;
    apply_meta(saver->state.meta, meta_json);
    if (async) {
      saver->checkpointer.save_async(saver->state);
    } else {
      saver->checkpointer.save(saver->state);
    }
  });
}

int dl_ckpt_saver_wait(dl_ckpt_saver* saver, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (saver == nullptr) throw dl::InputError("wait: NULL saver");
    saver->checkpointer.wait();
  });
}

int dl_ckpt_latest_valid(const char* dir, char* path, size_t path_len, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (dir == nullptr || path == nullptr || path_len == 0) {
      throw dl::InputError("latest_valid: NULL argument");
    }
    const std::string found = dl::ckpt::latest_valid(dir).value_or("");
    if (found.size() >= path_len) throw dl::InputError("latest_valid: path buffer too small");
    std::memcpy(path, found.c_str(), found.size() + 1);
  });
}

int dl_ckpt_reader_open(const char* step_dir, dl_ckpt_reader** out, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (step_dir == nullptr || out == nullptr) throw dl::InputError("open: NULL argument");
    auto reader = dl::ckpt::Reader::open(step_dir);
    const auto& m = reader.metadata();
    nlohmann::json info = {
        {"step", m.step},
        {"epoch", m.epoch},
        {"data_loader_position", m.data_loader_position},
        {"world_size", reader.world_size()},
        {"hyperparameters", nlohmann::json::parse(m.hyperparameters)},
        {"user_metadata", nlohmann::json::parse(m.user_metadata)},
        {"metrics", m.metrics},
        {"writer", nullptr},
        {"tensors", nlohmann::json::array()},
    };
    if (const auto w = reader.writer()) {
      info["writer"] = {{"job", w->job_key()},
                        {"job_id", w->job_id},
                        {"array_job_id", w->array_job_id},
                        {"array_task_id", w->array_task_id},
                        {"user", w->user},
                        {"uid", w->uid}};
    }
    for (const auto& t : reader.tensors()) {
      info["tensors"].push_back(
          {{"name", t.name}, {"dtype", dl::ckpt::dtype_name(t.dtype)}, {"shape", t.shape}});
    }
    *out = new dl_ckpt_reader{std::move(reader), info.dump()};
  });
}

void dl_ckpt_reader_close(dl_ckpt_reader* reader) { delete reader; }

const char* dl_ckpt_reader_info_json(dl_ckpt_reader* reader) {
  return reader ? reader->info.c_str() : "{}";
}

int dl_ckpt_reader_read(dl_ckpt_reader* reader, const char* name, const char* dtype, unsigned ndim,
                        const uint64_t* offset, const uint64_t* shape, void* data, char* err,
                        size_t err_len) {
  return guarded(err, err_len, [&] {
    if (reader == nullptr || name == nullptr || data == nullptr) {
      throw dl::InputError("read: NULL argument");
    }
    dl::ckpt::Slice slice;
    if (shape != nullptr) {
      slice.shape = shape_of(ndim, shape);
      slice.offset = offset ? shape_of(ndim, offset) : Shape(ndim, 0);
    }
    reader->reader.read(name, dtype_of(dtype), data, slice);
  });
}

int dl_ckpt_reader_rng(dl_ckpt_reader* reader, unsigned rank, const char* name, void* data,
                       size_t* size, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (reader == nullptr || name == nullptr || size == nullptr) {
      throw dl::InputError("rng: NULL argument");
    }
    const auto states = reader->reader.rng_states(rank);
    const auto it = states.find(name);
    if (it == states.end()) {
      throw dl::InputError(std::string("rng state '") + name + "' of rank " + std::to_string(rank) +
                           " is not in " + reader->reader.path());
    }
    if (data != nullptr) std::memcpy(data, it->second.data(), std::min(*size, it->second.size()));
    *size = it->second.size();
  });
}

}  // extern "C"
