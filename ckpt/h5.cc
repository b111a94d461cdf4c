#include "ckpt/h5.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "core/error.h"

namespace dl::ckpt::h5 {
namespace {

struct StackWalk {
  std::vector<std::string> descriptions;  // innermost first
};

herr_t collect(unsigned, const H5E_error2_t* err, void* data) {
  auto* walk = static_cast<StackWalk*>(data);
  if (err->desc != nullptr && *err->desc != '\0') walk->descriptions.emplace_back(err->desc);
  return 0;
}

// Turns the calling thread's HDF5 error stack into one exception: the innermost record
// says what went wrong (errno text included), the outermost what HDF5 was asked to do.
[[noreturn]] void fail(std::string_view what, std::string_view path) {
  StackWalk walk;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, &collect, &walk);
  H5Eclear2(H5E_DEFAULT);
  std::string reason = "unknown HDF5 error";
  if (!walk.descriptions.empty()) {
    reason = walk.descriptions.front();
    if (walk.descriptions.size() > 1 && walk.descriptions.back() != reason) {
      reason = fmt::format("{} ({})", reason, walk.descriptions.back());
    }
  }
  throw SystemError(fmt::format("couldn't {} {}: {}", what, path, reason));
}

hid_t check_id(hid_t id, std::string_view what, std::string_view path) {
  if (id < 0) fail(what, path);
  return id;
}

void check(herr_t status, std::string_view what, std::string_view path) {
  if (status < 0) fail(what, path);
}

Handle create_plist(hid_t cls, std::string_view path) {
  return Handle(check_id(H5Pcreate(cls), "create an HDF5 property list for", path));
}

Handle file_access_plist(std::string_view path) {
  Handle fapl = create_plist(H5P_FILE_ACCESS, path);
  // SEMI: closing the file fails while objects are open instead of deferring the real
  // close (and its write errors) to whichever handle happens to be released last.
  check(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_SEMI), "set the close degree of", path);
  // HDF5's flock() fails on some parallel filesystems (and is what HDF5_USE_FILE_LOCKING=
  // FALSE works around). The checkpoint protocol never has two processes on one file: a
  // shard is written under a name only its rank uses and read once it is committed.
  check(H5Pset_file_locking(fapl.get(), false, true), "turn off file locking for", path);
  return fapl;
}

std::vector<hsize_t> dims_of(const Shape& shape) {
  return std::vector<hsize_t>(shape.begin(), shape.end());
}

Handle create_space(const Shape& shape, std::string_view path) {
  if (shape.empty()) {
    return Handle(check_id(H5Screate(H5S_SCALAR), "create an HDF5 dataspace for", path));
  }
  const std::vector<hsize_t> dims = dims_of(shape);
  return Handle(check_id(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                         "create an HDF5 dataspace for", path));
}

Handle copy_type(hid_t type) {
  return Handle(check_id(H5Tcopy(type), "copy an HDF5 type for", "the checkpoint"));
}

Handle string_type(std::string_view path) {
  Handle t = copy_type(H5T_C_S1);
  check(H5Tset_size(t.get(), H5T_VARIABLE), "make a string type for", path);
  check(H5Tset_cset(t.get(), H5T_CSET_UTF8), "make a string type for", path);
  return t;
}

Handle create_attr(const File& file, hid_t object, const char* name, hid_t type, hid_t space) {
  return Handle(check_id(H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT),
                         fmt::format("create attribute {:?} in", name), file.path()));
}

Handle open_attr(const File& file, hid_t object, const char* name) {
  return Handle(check_id(H5Aopen(object, name, H5P_DEFAULT),
                         fmt::format("open attribute {:?} in", name), file.path()));
}

void write_attr_raw(const File& file, const Handle& attr, hid_t mem_type, const void* data,
                    const char* name) {
  check(H5Awrite(attr.get(), mem_type, data), fmt::format("write attribute {:?} in", name),
        file.path());
}

void read_attr_raw(const File& file, const Handle& attr, hid_t mem_type, void* data,
                   const char* name) {
  check(H5Aread(attr.get(), mem_type, data), fmt::format("read attribute {:?} in", name),
        file.path());
}

Shape space_shape(const File& file, const Handle& space, std::string_view what) {
  const H5S_class_t cls = H5Sget_simple_extent_type(space.get());
  if (cls == H5S_SCALAR) return {};
  if (cls != H5S_SIMPLE) {
    throw SystemError(
        fmt::format("couldn't read {} in {}: not a simple dataspace", what, file.path()));
  }
  const int n = H5Sget_simple_extent_ndims(space.get());
  if (n < 0) fail(fmt::format("read the shape of {} in", what), file.path());
  if (n > H5S_MAX_RANK) {
    throw SystemError(fmt::format("couldn't read {} in {}: {} dimensions", what, file.path(), n));
  }
  std::vector<hsize_t> dims(static_cast<std::size_t>(n));
  if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    fail(fmt::format("read the shape of {} in", what), file.path());
  }
  return Shape(dims.begin(), dims.end());
}

Shape attr_shape(const File& file, const Handle& attr, const char* name) {
  Handle space(
      check_id(H5Aget_space(attr.get()), fmt::format("read attribute {:?} in", name), file.path()));
  return space_shape(file, space, fmt::format("attribute {:?}", name));
}

}  // namespace

ErrorSilencer::ErrorSilencer() noexcept {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

ErrorSilencer::~ErrorSilencer() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

Handle::Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    if (id_ >= 0) H5Idec_ref(id_);
    id_ = std::exchange(other.id_, H5I_INVALID_HID);
  }
  return *this;
}

Handle::~Handle() {
  if (id_ >= 0) H5Idec_ref(id_);
}

hid_t Handle::release() noexcept { return std::exchange(id_, H5I_INVALID_HID); }

void File::close() {
  const hid_t id = release();
  if (id >= 0 && H5Fclose(id) < 0) fail("close HDF5 file", path_);
}

File create_file(const std::string& path, const std::string& display) {
  const std::string& name = display.empty() ? path : display;
  Handle fapl = file_access_plist(name);
  return File(check_id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
                       "create HDF5 file", name),
              name);
}

File open_file(const std::string& path, bool writable, const std::string& display) {
  const std::string& name = display.empty() ? path : display;
  Handle fapl = file_access_plist(name);
  return File(check_id(H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl.get()),
                       "open HDF5 file", name),
              name);
}

Handle file_type(DType dtype) {
  switch (dtype) {
    case DType::f16: {
      Handle t = copy_type(H5T_IEEE_F32LE);
      // Sign bit 15, exponent bits 10-14, mantissa bits 0-9, bias 15: IEEE 754 binary16,
      // in the order h5py uses so that it maps the type to numpy.float16.
      check(H5Tset_fields(t.get(), 15, 10, 5, 0, 10), "make the f16 type for", "the checkpoint");
      check(H5Tset_size(t.get(), 2), "make the f16 type for", "the checkpoint");
      check(H5Tset_ebias(t.get(), 15), "make the f16 type for", "the checkpoint");
      return t;
    }
    case DType::bf16: return copy_type(H5T_STD_U16LE);
    case DType::f32: return copy_type(H5T_IEEE_F32LE);
    case DType::f64: return copy_type(H5T_IEEE_F64LE);
    case DType::i32: return copy_type(H5T_STD_I32LE);
    case DType::i64: return copy_type(H5T_STD_I64LE);
    case DType::u8: return copy_type(H5T_STD_U8LE);
  }
  throw SystemError("unknown dtype");
}

Handle create_contiguous_dataset(const File& file, const std::string& name, DType dtype,
                                 const Shape& shape) {
  const std::string what = fmt::format("create dataset {} in", name);
  Handle lcpl = create_plist(H5P_LINK_CREATE, file.path());
  check(H5Pset_create_intermediate_group(lcpl.get(), 1), what, file.path());
  Handle dcpl = create_plist(H5P_DATASET_CREATE, file.path());
  check(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), what, file.path());
  check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), what, file.path());
  check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), what, file.path());
  Handle type = file_type(dtype);
  Handle space = create_space(shape, file.path());
  return Handle(check_id(H5Dcreate2(file.get(), name.c_str(), type.get(), space.get(), lcpl.get(),
                                    dcpl.get(), H5P_DEFAULT),
                         what, file.path()));
}

Handle open_dataset(const File& file, const std::string& name) {
  return Handle(check_id(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT),
                         fmt::format("open dataset {} in", name), file.path()));
}

std::optional<std::uint64_t> dataset_offset(const File&, const Handle& dataset) {
  const haddr_t addr = H5Dget_offset(dataset.get());
  // No storage (a dataset without elements) is not an error, but HDF5 may have pushed
  // a record saying so; drop it so that it does not decorate a later, real error.
  H5Eclear2(H5E_DEFAULT);
  if (addr == HADDR_UNDEF) return std::nullopt;
  return static_cast<std::uint64_t>(addr);
}

Shape dataset_shape(const File& file, const Handle& dataset) {
  Handle space(check_id(H5Dget_space(dataset.get()), "read a dataset's shape in", file.path()));
  return space_shape(file, space, "a dataset's shape");
}

bool dataset_is_contiguous(const File& file, const Handle& dataset) {
  Handle dcpl(
      check_id(H5Dget_create_plist(dataset.get()), "read a dataset's layout in", file.path()));
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout < 0) fail("read a dataset's layout in", file.path());
  return layout == H5D_CONTIGUOUS;
}

bool dataset_has_type(const File& file, const Handle& dataset, DType dtype) {
  Handle stored(check_id(H5Dget_type(dataset.get()), "read a dataset's type in", file.path()));
  Handle expected = file_type(dtype);
  const htri_t equal = H5Tequal(stored.get(), expected.get());
  if (equal < 0) fail("compare a dataset's type in", file.path());
  return equal > 0;
}

void write_attr(const File& file, hid_t object, const char* name, std::uint64_t value) {
  Handle space = create_space({}, file.path());
  Handle attr = create_attr(file, object, name, H5T_STD_U64LE, space.get());
  write_attr_raw(file, attr, H5T_NATIVE_UINT64, &value, name);
}

void write_attr(const File& file, hid_t object, const char* name, std::int64_t value) {
  Handle space = create_space({}, file.path());
  Handle attr = create_attr(file, object, name, H5T_STD_I64LE, space.get());
  write_attr_raw(file, attr, H5T_NATIVE_INT64, &value, name);
}

void write_attr(const File& file, hid_t object, const char* name, const Shape& values) {
  Handle space = create_space({values.size()}, file.path());
  Handle attr = create_attr(file, object, name, H5T_STD_U64LE, space.get());
  // A scalar tensor's shape has no elements; HDF5 refuses to write from a null buffer.
  if (!values.empty()) write_attr_raw(file, attr, H5T_NATIVE_UINT64, values.data(), name);
}

void write_attr(const File& file, hid_t object, const char* name, const std::string& value) {
  Handle space = create_space({}, file.path());
  Handle type = string_type(file.path());
  Handle attr = create_attr(file, object, name, type.get(), space.get());
  const char* text = value.c_str();
  write_attr_raw(file, attr, type.get(), &text, name);
}

void overwrite_attr(const File& file, hid_t object, const char* name, std::uint64_t value) {
  Handle attr = open_attr(file, object, name);
  write_attr_raw(file, attr, H5T_NATIVE_UINT64, &value, name);
}

std::uint64_t read_attr_u64(const File& file, hid_t object, const char* name) {
  Handle attr = open_attr(file, object, name);
  if (!attr_shape(file, attr, name).empty()) {
    throw SystemError(
        fmt::format("couldn't read attribute {:?} in {}: not a scalar", name, file.path()));
  }
  std::uint64_t value = 0;
  read_attr_raw(file, attr, H5T_NATIVE_UINT64, &value, name);
  return value;
}

Shape read_attr_u64s(const File& file, hid_t object, const char* name) {
  Handle attr = open_attr(file, object, name);
  const Shape shape = attr_shape(file, attr, name);
  if (shape.size() != 1 || shape[0] > 64) {
    throw SystemError(
        fmt::format("couldn't read attribute {:?} in {}: not a short list", name, file.path()));
  }
  Shape values(shape[0]);
  if (!values.empty()) read_attr_raw(file, attr, H5T_NATIVE_UINT64, values.data(), name);
  return values;
}

std::string read_attr_string(const File& file, hid_t object, const char* name) {
  Handle attr = open_attr(file, object, name);
  if (!attr_shape(file, attr, name).empty()) {
    throw SystemError(
        fmt::format("couldn't read attribute {:?} in {}: not a scalar", name, file.path()));
  }
  Handle type = string_type(file.path());
  char* text = nullptr;
  read_attr_raw(file, attr, type.get(), &text, name);
  std::string value = text != nullptr ? text : "";
  H5free_memory(text);
  return value;
}

}  // namespace dl::ckpt::h5
