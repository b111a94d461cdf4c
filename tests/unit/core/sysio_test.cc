#include "core/sysio.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace dl::sys {
namespace {

class SysioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dl-sysio-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    calls() = saved_;  // the test's replacements refer to its locals, gone by now
    remove_tree(dir_);
  }

  std::string path(const char* name) const { return join(dir_, name); }

  std::string dir_;
  ScopedCalls restore_;  // every test may replace calls; they come back here
  Calls saved_ = calls();
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const SystemError& e) {
    return e.what();
  }
  return "";
}

TEST_F(SysioTest, WritesRetryEintrAndContinueShortWrites) {
  const auto real = calls().pwrite;
  int call = 0;
  calls().pwrite = [&](int fd, const void* buf, std::size_t n, off_t off) -> ssize_t {
    ++call;
    if (call % 3 == 1) {
      errno = EINTR;
      return -1;
    }
    return real(fd, buf, std::min<std::size_t>(n, 3), off);  // at most 3 bytes at a time
  };
  Fd fd = open_file(path("f"), O_WRONLY | O_CREAT);
  write_all_at(fd, "hello, world", 12, 0);
  fd.close();
  EXPECT_EQ(call, 6);  // two interrupted, four short writes of 3 bytes
  EXPECT_EQ(read_file(path("f"), 100), "hello, world");
}

TEST_F(SysioTest, EnospcIsAnErrorNamingTheFile) {
  calls().pwrite = [](int, const void*, std::size_t, off_t) -> ssize_t {
    errno = ENOSPC;
    return -1;
  };
  Fd fd = open_file(path("f"), O_WRONLY | O_CREAT);
  EXPECT_EQ(message_of([&] { write_all_at(fd, "x", 1, 0); }),
            "couldn't write " + path("f") + ": No space left on device");
}

TEST_F(SysioTest, OpenAndFsyncRetryEintr) {
  const auto real_open = calls().open;
  const auto real_fsync = calls().fsync;
  int opens = 0, fsyncs = 0;
  calls().open = [&](int d, const char* p, int flags, mode_t mode) {
    if (opens++ == 0) {
      errno = EINTR;
      return -1;
    }
    return real_open(d, p, flags, mode);
  };
  calls().fsync = [&](int fd) {
    if (fsyncs++ == 0) {
      errno = EINTR;
      return -1;
    }
    return real_fsync(fd);
  };
  write_file_durably(path("f"), "content");
  EXPECT_EQ(read_file(path("f"), 100), "content");
  EXPECT_GE(opens, 3);  // the temporary file (twice), then the directory for its fsync
  EXPECT_GE(fsyncs, 3);
}

TEST_F(SysioTest, AFailedDurableWriteKeepsTheOldContentAndNoTemporary) {
  write_file_durably(path("latest"), "old");
  const auto real_fsync = calls().fsync;
  calls().fsync = [](int) {
    errno = EIO;
    return -1;
  };
  const std::string message = message_of([&] { write_file_durably(path("latest"), "new"); });
  EXPECT_EQ(message.rfind("couldn't fsync " + path("latest") + ".tmp.", 0), 0u) << message;
  EXPECT_NE(message.find(": Input/output error"), std::string::npos) << message;
  calls().fsync = real_fsync;
  EXPECT_EQ(read_file(path("latest"), 100), "old");
  EXPECT_EQ(list_dir(dir_), std::vector<std::string>{"latest"});
}

TEST_F(SysioTest, ReadsStopAtTheEndOfTheFile) {
  write_file_durably(path("f"), "abc");
  Fd fd = open_file(path("f"), O_RDONLY);
  char buf[8];
  EXPECT_EQ(message_of([&] { read_exact_at(fd, buf, 8, 0); }),
            "couldn't read " + path("f") + ": unexpected end of file at byte 3");
  EXPECT_EQ(message_of([&] { read_file(path("f"), 2); }),
            "couldn't read " + path("f") + ": 3 bytes is more than the 2 allowed");
}

TEST_F(SysioTest, DirectoriesAndTrees) {
  EXPECT_TRUE(make_dir(path("d")));
  EXPECT_FALSE(make_dir(path("d")));
  make_dirs(path("a/b/c"));
  write_file_durably(path("a/b/c/f"), "x");
  EXPECT_EQ(file_type(path("a/b/c")), FileType::directory);
  EXPECT_EQ(file_type(path("a/b/c/f")), FileType::file);
  EXPECT_EQ(file_size(path("a/b/c/f")), 1u);
  remove_tree(path("a"));
  EXPECT_EQ(file_type(path("a")), FileType::missing);
  write_file_durably(path("file"), "x");
  EXPECT_EQ(message_of([&] { make_dir(path("file")); }),
            "couldn't create directory " + path("file") + ": File exists");
  EXPECT_EQ(message_of([&] { list_dir(path("nope")); }),
            "couldn't list directory " + path("nope") + ": No such file or directory");
}

TEST_F(SysioTest, RenameExchangeSwapsAtomically) {
  write_file_durably(path("a"), "A");
  write_file_durably(path("b"), "B");
  rename_path(path("a"), path("b"), true);
  EXPECT_EQ(read_file(path("a"), 10), "B");
  EXPECT_EQ(read_file(path("b"), 10), "A");
  EXPECT_NE(message_of([&] { rename_path(path("nope"), path("b")); }), "");
}

TEST(Sysio, Paths) {
  EXPECT_EQ(join("/a", "b"), "/a/b");
  EXPECT_EQ(join("/a/", "b"), "/a/b");
  EXPECT_EQ(parent_dir("/a/b"), "/a");
  EXPECT_EQ(parent_dir("/a/b/"), "/a");
  EXPECT_EQ(parent_dir("/a"), "/");
  EXPECT_EQ(parent_dir("b"), ".");
  EXPECT_FALSE(hostname().empty());
}

}  // namespace
}  // namespace dl::sys
