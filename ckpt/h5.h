// The HDF5 C API as the checkpoint library uses it, HighFive-style: every raw call is
// wrapped once here, hid_t values are owned by move-only handles, and a failed call
// throws dl::SystemError carrying HDF5's own message and the file's path, e.g.
// "couldn't open HDF5 file /ckpt/x.h5: unable to open file: name = '/ckpt/x.h5', errno =
// 2, error message = 'No such file or directory'".
//
// HDF5 prints its error stack to stderr by default; every entry point that uses these
// wrappers holds an ErrorSilencer, so the message reaches the user once, through the
// exception.
#pragma once

#include <dl/ckpt_types.h>
#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dl::ckpt::h5 {

// Turns HDF5's automatic error printing off for the calling thread while it lives
// (HDF5 keeps one error stack and printing setting per thread in thread-safe builds).
class ErrorSilencer {
 public:
  ErrorSilencer() noexcept;
  ~ErrorSilencer();
  ErrorSilencer(const ErrorSilencer&) = delete;
  ErrorSilencer& operator=(const ErrorSilencer&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// Owns one reference to an HDF5 identifier (any kind), released on destruction.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) noexcept : id_(id) {}
  Handle(Handle&& other) noexcept;
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();

  hid_t get() const noexcept { return id_; }

 protected:
  hid_t release() noexcept;

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// An open file. close() reports what HDF5 could not flush (ENOSPC lands here); the
// destructor releases silently when an exception is already on its way.
class File : public Handle {
 public:
  File() = default;
  File(hid_t id, std::string path) noexcept : Handle(id), path_(std::move(path)) {}
  const std::string& path() const noexcept { return path_; }
  void close();

 private:
  std::string path_;
};

// `path` is what HDF5 opens (e.g. /proc/self/fd/N: a file this library already opened,
// so HDF5 sees exactly that file, whatever names change meanwhile); `display` names it
// in errors (default: `path`). create_file truncates the file at `path`.
File create_file(const std::string& path, const std::string& display = "");
File open_file(const std::string& path, bool writable, const std::string& display = "");

// A dataset with contiguous storage allocated at creation and never filled: the
// library writes the bytes itself at dataset_offset(), and HDF5 never touches them.
// Intermediate groups of `name` ("tensors/model/w") are created as needed.
Handle create_contiguous_dataset(const File& file, const std::string& name, DType dtype,
                                 const Shape& shape);
Handle open_dataset(const File& file, const std::string& name);

// The file offset of a contiguous dataset's bytes; nullopt when it has none (no
// elements).
std::optional<std::uint64_t> dataset_offset(const File& file, const Handle& dataset);
Shape dataset_shape(const File& file, const Handle& dataset);
bool dataset_is_contiguous(const File& file, const Handle& dataset);
// Whether the dataset's stored type is exactly the one create_contiguous_dataset uses.
bool dataset_has_type(const File& file, const Handle& dataset, DType dtype);

// Attributes on a file's root group or a dataset (`object` is either).
void write_attr(const File& file, hid_t object, const char* name, std::uint64_t value);
void write_attr(const File& file, hid_t object, const char* name, std::int64_t value);
void write_attr(const File& file, hid_t object, const char* name, const Shape& values);
void write_attr(const File& file, hid_t object, const char* name, const std::string& value);
// Overwrites an existing 64-bit unsigned attribute in place (same size, so the file's
// metadata layout does not change).
void overwrite_attr(const File& file, hid_t object, const char* name, std::uint64_t value);

std::uint64_t read_attr_u64(const File& file, hid_t object, const char* name);
Shape read_attr_u64s(const File& file, hid_t object, const char* name);
// Not for files others may have written: libhdf5 allocates the length the file claims
// for a variable-length string (up to 4 GiB) before reading it.
std::string read_attr_string(const File& file, hid_t object, const char* name);

// The native (file) type of a dtype: little-endian IEEE floats and two's complement
// integers; f16 built as h5py builds numpy.float16; bf16 as uint16.
Handle file_type(DType dtype);

}  // namespace dl::ckpt::h5
