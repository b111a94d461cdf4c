#include "core/step_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace dl {
namespace {

namespace fs = std::filesystem;

struct stat shared_dir() {
  struct stat st {};
  st.st_mode = S_IFDIR | 01777;
  st.st_uid = 0;
  return st;
}

struct stat file_of(uid_t uid, mode_t type = S_IFREG) {
  struct stat st {};
  st.st_mode = type | 0600;
  st.st_uid = uid;
  return st;
}

TEST(ChannelFileStem, IsThePrefixThenTheRank) {
  EXPECT_EQ(channel_file_prefix("4711", "3"), "dlrun-4711.3-");
  EXPECT_EQ(channel_file_stem("4711", "3", 12), "dlrun-4711.3-12-");
  EXPECT_EQ(channel_file_stem("100_3", "0", 0), "dlrun-100_3.0-0-");
}

TEST(RemovableChannelFile, DlrunsRandomSuffixOrAnOldPid) {
  const std::string prefix = channel_file_prefix("12", "3");
  const struct stat dir = shared_dir();
  EXPECT_TRUE(
      removable_channel_file(dir, "dlrun-12.3-0-0123456789abcdef", file_of(1000), prefix, 1000));
  EXPECT_TRUE(removable_channel_file(dir, "dlrun-12.3-7-98765", file_of(1000), prefix, 1000));
  // More than 16 digits, upper case, not hex.
  for (const char* name : {"dlrun-12.3-0-0123456789abcdef0", "dlrun-12.3-0-0123456789ABCDEF",
                           "dlrun-12.3-0-0123456789abcdeg"}) {
    EXPECT_FALSE(removable_channel_file(dir, name, file_of(1000), prefix, 1000)) << name;
  }
}

TEST(RemovableChannelFile, OnlyTheStepsRegularFilesOfTheUser) {
  const std::string prefix = channel_file_prefix("12", "3");
  const struct stat dir = shared_dir();
  EXPECT_TRUE(removable_channel_file(dir, "dlrun-12.3-0-100", file_of(1000), prefix, 1000));
  // Another job, another step, a job or step id that merely starts the same.
  EXPECT_FALSE(removable_channel_file(dir, "dlrun-13.3-0-100", file_of(1000), prefix, 1000));
  EXPECT_FALSE(removable_channel_file(dir, "dlrun-12.4-0-100", file_of(1000), prefix, 1000));
  EXPECT_FALSE(removable_channel_file(dir, "dlrun-12.34-0-100", file_of(1000), prefix, 1000));
  EXPECT_FALSE(removable_channel_file(dir, "dlrun-120.3-0-100", file_of(1000), prefix, 1000));
  // Not "<rank>-<pid>" after the prefix.
  for (const char* name : {"dlrun-12.3-", "dlrun-12.3-0", "dlrun-12.3-0-", "dlrun-12.3--5",
                           "dlrun-12.3-0-5x", "dlrun-12.3-a-5", "dlrun-12.3-0-5-6"}) {
    EXPECT_FALSE(removable_channel_file(dir, name, file_of(1000), prefix, 1000)) << name;
  }
  // Someone else's file, a link, a FIFO, a directory, a device.
  EXPECT_FALSE(removable_channel_file(dir, "dlrun-12.3-0-100", file_of(1001), prefix, 1000));
  EXPECT_FALSE(removable_channel_file(dir, "dlrun-12.3-0-100", file_of(0), prefix, 1000));
  for (const mode_t type : {S_IFLNK, S_IFIFO, S_IFDIR, S_IFCHR, S_IFSOCK}) {
    EXPECT_FALSE(removable_channel_file(dir, "dlrun-12.3-0-100", file_of(1000, type), prefix, 1000))
        << std::oct << type;
  }
}

TEST(RemovableChannelFile, OnlyWhereTheUserCouldRemoveItToo) {
  const std::string prefix = channel_file_prefix("12", "3");
  const struct stat file = file_of(1000);
  struct stat dir = shared_dir();
  EXPECT_TRUE(removable_channel_file(dir, "dlrun-12.3-0-1", file, prefix, 1000));
  dir.st_mode = S_IFDIR | 0777;  // not sticky: rather left alone than guessed
  EXPECT_FALSE(removable_channel_file(dir, "dlrun-12.3-0-1", file, prefix, 1000));
  dir.st_mode = S_IFDIR | 01775;  // sticky, but not writable by everyone
  EXPECT_FALSE(removable_channel_file(dir, "dlrun-12.3-0-1", file, prefix, 1000));
  dir.st_mode = S_IFDIR | 0700;
  dir.st_uid = 1000;  // the user's own directory
  EXPECT_TRUE(removable_channel_file(dir, "dlrun-12.3-0-1", file, prefix, 1000));
  dir.st_uid = 1001;
  EXPECT_FALSE(removable_channel_file(dir, "dlrun-12.3-0-1", file, prefix, 1000));
}

class RemoveChannelFiles : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dl-step-files-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void touch(const std::string& name) { std::ofstream(dir_ + "/" + name) << "x"; }
  bool exists(const std::string& name) {
    struct stat st;
    return ::lstat((dir_ + "/" + name).c_str(), &st) == 0;
  }

  std::string dir_;
};

TEST_F(RemoveChannelFiles, RemovesTheStepsFilesAndNothingElse) {
  touch("dlrun-12.3-0-100");
  touch("dlrun-12.3-1-101");
  touch("dlrun-12.4-0-102");   // another step
  touch("dlrun-12.30-0-103");  // another step
  touch("dlrun-12.3-0-x");     // not a rank and pid
  touch("target");
  // A link and a FIFO planted at matching names: the link is not followed (its target
  // stays), the FIFO is never opened (nothing blocks); neither is removed.
  ASSERT_EQ(::symlink((dir_ + "/target").c_str(), (dir_ + "/dlrun-12.3-2-104").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir_ + "/dlrun-12.3-3-105").c_str(), 0600), 0);
  ASSERT_EQ(::mkdir((dir_ + "/dlrun-12.3-4-106").c_str(), 0700), 0);
  EXPECT_EQ(remove_channel_files(dir_, channel_file_prefix("12", "3"), ::geteuid()), 2u);
  EXPECT_FALSE(exists("dlrun-12.3-0-100"));
  EXPECT_FALSE(exists("dlrun-12.3-1-101"));
  for (const char* kept : {"dlrun-12.4-0-102", "dlrun-12.30-0-103", "dlrun-12.3-0-x", "target",
                           "dlrun-12.3-2-104", "dlrun-12.3-3-105", "dlrun-12.3-4-106"}) {
    EXPECT_TRUE(exists(kept)) << kept;
  }
}

TEST_F(RemoveChannelFiles, NotForAnotherUser) {
  touch("dlrun-12.3-0-100");
  EXPECT_EQ(remove_channel_files(dir_, channel_file_prefix("12", "3"), ::geteuid() + 1), 0u);
  EXPECT_TRUE(exists("dlrun-12.3-0-100"));
}

TEST_F(RemoveChannelFiles, RefusesALinkAsTheDirectoryAndIgnoresAMissingOne) {
  touch("dlrun-12.3-0-100");
  const std::string link = dir_ + "-link";
  ASSERT_EQ(::symlink(dir_.c_str(), link.c_str()), 0);
  EXPECT_THROW(remove_channel_files(link, channel_file_prefix("12", "3"), ::geteuid()),
               SystemError);
  ::unlink(link.c_str());
  EXPECT_TRUE(exists("dlrun-12.3-0-100"));
  EXPECT_EQ(remove_channel_files(dir_ + "/missing", channel_file_prefix("12", "3"), ::geteuid()),
            0u);
}

}  // namespace
}  // namespace dl
