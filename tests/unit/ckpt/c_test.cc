// The C interface (dl/ckpt_c.h): the same checkpoints as the C++ API, errors as -1 and a
// message, never an exception.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "dl/ckpt.h"
#include "dl/ckpt_c.h"
#include "tests/unit/ckpt/test_util.h"

namespace dl::ckpt::test {
namespace {

TEST(CkptC, SavesWhatTheCxxReaderReadsAndReadsItBack) {
  TempDir dir;
  char err[512];
  dl_ckpt_saver* saver = nullptr;
  ASSERT_EQ(dl_ckpt_saver_new(dir.path().c_str(), &saver, err, sizeof err), 0) << err;
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  const std::array<std::uint64_t, 2> shape = {2, 3};
  ASSERT_EQ(dl_ckpt_saver_add_tensor(saver, "model/w", "f32", 2, shape.data(), nullptr, nullptr,
                                     w.data(), err, sizeof err),
            0)
      << err;
  ASSERT_EQ(dl_ckpt_saver_add_rng(saver, "np", "xyz", 3, err, sizeof err), 0) << err;
  ASSERT_EQ(dl_ckpt_saver_save(saver, 42, R"({"epoch": 3, "metrics": {"loss": 0.25}})", 0, err,
                               sizeof err),
            0)
      << err;
  dl_ckpt_saver_free(saver);

  char path[4096];
  ASSERT_EQ(dl_ckpt_latest_valid(dir.path().c_str(), path, sizeof path, err, sizeof err), 0);
  EXPECT_EQ(std::string(path), dir / "step-000000042");
  const Reader cxx = Reader::open(path);
  EXPECT_EQ(cxx.metadata().step, 42u);
  EXPECT_EQ(cxx.metadata().epoch, 3u);
  EXPECT_EQ(cxx.metadata().metrics.at("loss"), 0.25);

  dl_ckpt_reader* reader = nullptr;
  ASSERT_EQ(dl_ckpt_reader_open(path, &reader, err, sizeof err), 0) << err;
  const std::string info = dl_ckpt_reader_info_json(reader);
  EXPECT_NE(info.find(R"("step":42)"), std::string::npos) << info;
  EXPECT_NE(info.find(R"({"dtype":"f32","name":"model/w","shape":[2,3]})"), std::string::npos)
      << info;
  std::vector<float> box(2);
  const std::array<std::uint64_t, 2> offset = {1, 1}, box_shape = {1, 2};
  ASSERT_EQ(dl_ckpt_reader_read(reader, "model/w", "f32", 2, offset.data(), box_shape.data(),
                                box.data(), err, sizeof err),
            0)
      << err;
  EXPECT_EQ(box, (std::vector<float>{5, 6}));
  std::size_t size = 0;
  ASSERT_EQ(dl_ckpt_reader_rng(reader, 0, "np", nullptr, &size, err, sizeof err), 0) << err;
  std::string rng(size, '\0');
  ASSERT_EQ(dl_ckpt_reader_rng(reader, 0, "np", rng.data(), &size, err, sizeof err), 0) << err;
  EXPECT_EQ(rng, "xyz");
  dl_ckpt_reader_close(reader);
}

TEST(CkptC, ErrorsAreMessagesNotExceptions) {
  TempDir dir;
  char err[512];
  dl_ckpt_saver* saver = nullptr;
  ASSERT_EQ(dl_ckpt_saver_new(dir.path().c_str(), &saver, err, sizeof err), 0) << err;
  const std::uint64_t n = 1;
  const float x = 0;
  EXPECT_EQ(
      dl_ckpt_saver_add_tensor(saver, "x", "f128", 1, &n, nullptr, nullptr, &x, err, sizeof err),
      -1);
  EXPECT_STREQ(err, "dtype 'f128': expected f16, bf16, f32, f64, i32, i64 or u8");
  EXPECT_EQ(dl_ckpt_saver_save(saver, 1, "[1]", 0, err, sizeof err), -1);
  EXPECT_STREQ(err, "metadata: expected a JSON object");
  dl_ckpt_saver_free(saver);

  dl_ckpt_reader* reader = nullptr;
  EXPECT_EQ(dl_ckpt_reader_open((dir / "nothing").c_str(), &reader, err, sizeof err), -1);
  EXPECT_NE(std::string(err).find(dir / "nothing"), std::string::npos) << err;
  EXPECT_EQ(reader, nullptr);
  // A short error buffer still gets a terminated prefix.
  char small[8];
  EXPECT_EQ(dl_ckpt_reader_open((dir / "nothing").c_str(), &reader, small, sizeof small), -1);
  EXPECT_EQ(std::strlen(small), 7u);
}

}  // namespace
}  // namespace dl::ckpt::test
