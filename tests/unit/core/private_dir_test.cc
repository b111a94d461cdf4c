#include "core/private_dir.h"

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

class PrivateDir : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dl-private-dir-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    root_ = base_ + "/root";
    fs::create_directory(root_);
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string error_of(const std::string& dir) {
    try {
      ensure_private_dir(dir, {root_});
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(accepted)";
  }

  std::string base_;
  std::string root_;
};

TEST_F(PrivateDir, CreatesMissingComponentsPrivately) {
  const std::string dir = root_ + "/alice/job";
  ensure_private_dir(dir, {"/nowhere", root_});
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat((root_ + "/alice").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  // Idempotent: a requeued job finds the same directory.
  EXPECT_NO_THROW(ensure_private_dir(dir, {root_}));
}

TEST_F(PrivateDir, KeepsTheModeOfAnExistingDirectory) {
  fs::create_directory(root_ + "/shared");
  ::chmod((root_ + "/shared").c_str(), 0750);
  ensure_private_dir(root_ + "/shared", {root_});
  struct stat st;
  ASSERT_EQ(::stat((root_ + "/shared").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

TEST_F(PrivateDir, RefusesASymlinkBelowTheRoot) {
  fs::create_directory(base_ + "/elsewhere");
  fs::create_directory_symlink(base_ + "/elsewhere", root_ + "/alice");
  EXPECT_EQ(error_of(root_ + "/alice/job"),
            root_ + "/alice is a symbolic link (owner root (uid 0)); refusing to follow it");
  EXPECT_FALSE(fs::exists(base_ + "/elsewhere/job"));
  EXPECT_EQ(error_of(root_ + "/alice"),
            root_ + "/alice is a symbolic link (owner root (uid 0)); refusing to follow it");
}

TEST_F(PrivateDir, FollowsTheRootItself) {
  fs::create_directory_symlink(root_, base_ + "/link-to-root");
  EXPECT_NO_THROW(ensure_private_dir(base_ + "/link-to-root/a", {base_ + "/link-to-root"}));
  EXPECT_TRUE(fs::is_directory(root_ + "/a"));
}

TEST_F(PrivateDir, RefusesAFileInThePath) {
  std::ofstream(root_ + "/file") << "x";
  EXPECT_EQ(error_of(root_ + "/file/job"), root_ + "/file is not a directory");
}

TEST_F(PrivateDir, RefusesPathsOutsideTheRoots) {
  EXPECT_EQ(error_of(base_ + "/other"),
            base_ + "/other: not under an allowed checkpoint root (" + root_ + ")");
  EXPECT_EQ(error_of(root_ + "x/a"),
            root_ + "x/a: not under an allowed checkpoint root (" + root_ + ")");
  EXPECT_FALSE(fs::exists(root_ + "x"));
}

TEST_F(PrivateDir, NeedsAnExistingRoot) {
  fs::remove(root_);
  EXPECT_EQ(error_of(root_ + "/a"),
            "checkpoint root " + root_ + " does not exist (an administrator must create it)");
}

TEST_F(PrivateDir, RefusesSomeoneElsesDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  fs::create_directory(root_ + "/bob");
  ASSERT_EQ(::chown((root_ + "/bob").c_str(), 65534, 65534), 0);
  EXPECT_EQ(error_of(root_ + "/bob"),
            root_ +
                "/bob belongs to nobody (uid 65534), not to the job's user root (uid 0); "
                "refusing to use it");
}

}  // namespace
}  // namespace dl

namespace dl {
namespace {

class HostilePath : public testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
    char tmpl[] = "/tmp/dl-hostile-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ::chmod(root_.c_str(), 01777);
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }
  std::string error_of(const std::string& dir, uid_t uid) {
    try {
      check_private_path(dir, {root_}, uid);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(accepted)";
  }
  std::string root_;
};

TEST_F(HostilePath, AComponentOfAnotherUserIsRefusedNamingItsOwner) {
  fs::create_directory(root_ + "/victim");
  ASSERT_EQ(::chown((root_ + "/victim").c_str(), 65534, 65534), 0);
  ::chmod((root_ + "/victim").c_str(), 0755);
  EXPECT_EQ(error_of(root_ + "/victim/4711", 54321),
            root_ +
                "/victim belongs to nobody (uid 65534), not to the job's user uid 54321; "
                "refusing to use it");
  EXPECT_FALSE(fs::exists(root_ + "/victim/4711"));
}

TEST_F(HostilePath, AWritableComponentIsRefusedEvenIfItIsTheUsers) {
  fs::create_directories(root_ + "/u/shared");
  ASSERT_EQ(::chown((root_ + "/u").c_str(), 54321, 54321), 0);
  ASSERT_EQ(::chown((root_ + "/u/shared").c_str(), 54321, 54321), 0);
  ::chmod((root_ + "/u").c_str(), 0777);
  EXPECT_NE(error_of(root_ + "/u/shared", 54321)
                .find(root_ + "/u (owner uid 54321, mode 0777) is "
                              "writable by other users"),
            std::string::npos);
  ::chmod((root_ + "/u").c_str(), 0700);
  ::chmod((root_ + "/u/shared").c_str(), 0700);
  EXPECT_EQ(error_of(root_ + "/u/shared", 54321), "(accepted)");
  // What does not exist yet is not an error before the job creates it.
  EXPECT_EQ(error_of(root_ + "/u/shared/a/b", 54321), "(accepted)");
}

TEST_F(HostilePath, ASharedRootNeedsTheStickyBit) {
  ::chmod(root_.c_str(), 0777);
  EXPECT_NE(error_of(root_ + "/u", 54321).find("without the sticky bit"), std::string::npos);
}

TEST_F(HostilePath, ARootOfAnotherUserIsRefusedNamingItsOwner) {
  ASSERT_EQ(::chown(root_.c_str(), 65534, 65534), 0);
  const std::string why = root_ +
                          " belongs to nobody (uid 65534), neither root nor uid 54321: its owner "
                          "could replace what lies below it; refusing to use it as a root (an "
                          "administrator must remove it or chown it to root)";
  EXPECT_EQ(error_of(root_ + "/u/4711", 54321), why);
  EXPECT_THROW(check_root(root_, 54321), InputError);
  // The user's own root (their home) is theirs to use.
  EXPECT_EQ(error_of(root_ + "/u/4711", 65534), "(accepted)");
  EXPECT_NO_THROW(check_root(root_, 65534));
}

TEST_F(HostilePath, ALinkOfAnotherUserAboveTheRootIsRefused) {
  fs::create_directory(root_ + "/real");
  const std::string link = root_ + "/link";
  fs::create_directory_symlink(root_ + "/real", link);
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);
  try {
    check_private_path(link + "/u", {link}, 54321);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(link + " belongs to nobody (uid 65534)", 0), 0u);
  }
  // A directory above the root that others may write to needs the sticky bit.
  fs::create_directories(root_ + "/open/site");
  ::chmod((root_ + "/open").c_str(), 0777);
  EXPECT_THROW(check_root(root_ + "/open/site", 54321), InputError);
}

TEST_F(HostilePath, MakesASharedRootOfRootsWithTheStickyBit) {
  const std::string site = root_ + "/site";
  make_shared_root(site);
  struct stat st;
  ASSERT_EQ(::stat(site.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 01777u);
  EXPECT_NO_THROW(make_shared_root(site));  // idempotent
  // Made by another user first: left as it is, refused.
  const std::string squat = root_ + "/squat";
  fs::create_directory(squat);
  ASSERT_EQ(::chown(squat.c_str(), 65534, 65534), 0);
  EXPECT_THROW(make_shared_root(squat), InputError);
  ASSERT_EQ(::stat(squat.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
}

}  // namespace
}  // namespace dl
