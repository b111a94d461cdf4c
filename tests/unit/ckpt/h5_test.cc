// The HDF5 wrappers: errors carry HDF5's message and the path, and HDF5 prints nothing.
#include "ckpt/h5.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/unit/ckpt/test_util.h"

namespace dl::ckpt::h5 {
namespace {

using test::TempDir;

std::string open_error(const std::string& path) {
  try {
    open_file(path, false);
  } catch (const SystemError& e) {
    return e.what();
  }
  return "";
}

TEST(CkptH5, AMissingFileNamesThePathAndErrno) {
  TempDir dir;
  ErrorSilencer quiet;
  ::testing::internal::CaptureStderr();
  const std::string message = open_error(dir / "nope.h5");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(message.rfind("couldn't open HDF5 file " + (dir / "nope.h5") + ": ", 0), 0u) << message;
  EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
}

TEST(CkptH5, GarbageIsNotHdf5) {
  TempDir dir;
  test::write_bytes(dir / "garbage.h5", std::string(4096, 'g'));
  ErrorSilencer quiet;
  ::testing::internal::CaptureStderr();
  const std::string message = open_error(dir / "garbage.h5");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_NE(message.find("file signature not found"), std::string::npos) << message;
}

TEST(CkptH5, TheSilencerRestoresPrinting) {
  H5E_auto2_t before = nullptr;
  void* data = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &before, &data);
  {
    ErrorSilencer quiet;
    H5E_auto2_t inside = nullptr;
    H5Eget_auto2(H5E_DEFAULT, &inside, &data);
    EXPECT_EQ(inside, nullptr);
  }
  H5E_auto2_t after = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &after, &data);
  EXPECT_EQ(after, before);
}

TEST(CkptH5, AttributesAndDatasetsRoundTrip) {
  TempDir dir;
  ErrorSilencer quiet;
  {
    File f = create_file(dir / "a.h5");
    write_attr(f, f.get(), "u", std::uint64_t{18446744073709551615ull});
    write_attr(f, f.get(), "i", std::int64_t{-5});
    write_attr(f, f.get(), "shape", Shape{3, 4});
    write_attr(f, f.get(), "empty", Shape{});
    write_attr(f, f.get(), "s", std::string("h\xc3\xa9llo"));
    {
      Handle ds = create_contiguous_dataset(f, "g/h/half", DType::f16, {2, 8});
      write_attr(f, ds.get(), "x", std::uint64_t{0});
      overwrite_attr(f, ds.get(), "x", 42);
      Handle none = create_contiguous_dataset(f, "none", DType::u8, {0});
      EXPECT_FALSE(dataset_offset(f, none));
      EXPECT_TRUE(dataset_offset(f, ds));
    }
    EXPECT_THROW(write_attr(f, f.get(), "u", std::uint64_t{1}), SystemError);  // exists
    f.close();
  }
  File f = open_file(dir / "a.h5", false);
  EXPECT_EQ(read_attr_u64(f, f.get(), "u"), 18446744073709551615ull);
  EXPECT_EQ(read_attr_u64s(f, f.get(), "shape"), (Shape{3, 4}));
  EXPECT_EQ(read_attr_u64s(f, f.get(), "empty"), Shape{});
  EXPECT_EQ(read_attr_string(f, f.get(), "s"), "h\xc3\xa9llo");
  EXPECT_THROW(read_attr_u64(f, f.get(), "shape"), SystemError);  // not a scalar
  EXPECT_THROW(read_attr_string(f, f.get(), "nope"), SystemError);
  Handle ds = open_dataset(f, "g/h/half");
  EXPECT_EQ(dataset_shape(f, ds), (Shape{2, 8}));
  EXPECT_TRUE(dataset_is_contiguous(f, ds));
  EXPECT_TRUE(dataset_has_type(f, ds, DType::f16));
  EXPECT_FALSE(dataset_has_type(f, ds, DType::bf16));
  EXPECT_EQ(read_attr_u64(f, ds.get(), "x"), 42u);
  try {
    open_dataset(f, "missing");
    FAIL();
  } catch (const SystemError& e) {
    EXPECT_EQ(
        std::string(e.what()).rfind("couldn't open dataset missing in " + (dir / "a.h5") + ": ", 0),
        0u)
        << e.what();
  }
}

TEST(CkptH5, ClosingWithObjectsOpenIsAnError) {
  TempDir dir;
  ErrorSilencer quiet;
  File f = create_file(dir / "b.h5");
  Handle ds = create_contiguous_dataset(f, "d", DType::i32, {4});
  EXPECT_THROW(f.close(), SystemError);
}

}  // namespace
}  // namespace dl::ckpt::h5
