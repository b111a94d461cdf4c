// Issue 12, items 5 and 6: names planted inside a checkpoint directory (links, FIFOs,
// directories) and files of absurd sizes. Nothing planted is written through or
// deleted through, and every such file makes its checkpoint unusable at once (an older
// one is taken) instead of hanging or filling memory.
#include <dl/ckpt.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "ckpt/manifest.h"
#include "ckpt/store.h"
#include "core/error.h"
#include "tests/unit/ckpt/test_util.h"

namespace dl::ckpt {
namespace {

using test::LogCapture;
using test::names_in;
using test::TempDir;

struct Model {
  std::vector<float> w = std::vector<float>(1000, 1.5f);
  State state(std::uint64_t step) const {
    State s;
    s.meta.step = step;
    s.tensors = {{"w", DType::f32, {w.size()}, w.data()}};
    return s;
  }
};

Options options(const std::string& dir) {
  Options o;
  o.dir = dir;
  o.run_id = "hostile";
  return o;
}

// A victim's files outside the checkpoint directory: "precious" and victim/keep.
struct Victim {
  TempDir home;
  Victim() {
    test::write_bytes(home / "precious", "precious");
    sys::make_dir(home / "victim");
    test::write_bytes(home / "victim/keep", "keep");
  }
  void expect_intact() const {
    EXPECT_EQ(sys::read_file(home / "precious", 100), "precious");
    EXPECT_EQ(sys::read_file(home / "victim/keep", 100), "keep");
  }
};

void link(const std::string& target, const std::string& at) {
  ASSERT_EQ(::symlink(target.c_str(), at.c_str()), 0) << at;
}

void fifo(const std::string& at) { ASSERT_EQ(::mkfifo(at.c_str(), 0600), 0) << at; }

TEST(CkptHostile, LinksPlantedAtEveryNameASaveWritesAreNeitherFollowedNorTruncated) {
  Victim v;
  TempDir dir;
  const Model m;
  const std::string precious = v.home / "precious";
  // The names a save of step 100 by run "hostile" uses, and the ones it used to use.
  const std::string staging = dir / ".tmp-step-000000100.hostile";
  sys::make_dir(staging);
  for (const char* name : {"shard-00000-of-00001.h5", "shard-00000-of-00001.h5.partial",
                           "manifest.json", "manifest.json.tmp", "sub"}) {
    link(std::string(name) == "sub" ? v.home / "victim" : precious, staging + "/" + name);
  }
  link(precious, dir / "latest");
  link(precious, dir / ("latest.tmp." + std::to_string(::getpid())));
  link(v.home / "victim", dir / ".tmp-step-000000200.hostile");
  fifo(dir / ".tmp-step-000000300.hostile");
  Checkpointer ckpt(options(dir.path()));
  ckpt.save(m.state(100));
  ckpt.save(m.state(200));
  ckpt.save(m.state(300));
  v.expect_intact();
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"latest", "step-000000100",
                                                            "step-000000200", "step-000000300"}));
  EXPECT_EQ(sys::file_type(dir / "latest"), sys::FileType::file);
  EXPECT_NO_THROW(Reader::open(dir / "step-000000300", Verify::full));
}

TEST(CkptHostile, AStagingDirectoryFoundIsNotReusedByALoneRank) {
  TempDir dir;
  const Model m;
  const std::string staging = dir / ".tmp-step-000000100.hostile";
  sys::make_dir(staging);
  test::write_bytes(staging + "/shard-00000-of-00001.h5", "stale");
  Checkpointer ckpt(options(dir.path()));
  ckpt.save(m.state(100));
  EXPECT_EQ(names_in(dir / "step-000000100"),
            (std::vector<std::string>{"manifest.json", "shard-00000-of-00001.h5"}));
  EXPECT_NO_THROW(Reader::open(dir / "step-000000100", Verify::full));
}

TEST(CkptHostile, PruneAndCleanUpNeverDeleteThroughALink) {
  Victim v;
  TempDir dir;
  const Model m;
  // A link named like a step (older than everything), like a save in progress of an
  // earlier run, like a removal in progress, and a real step directory holding a link.
  link(v.home / "victim", dir / "step-000000001");
  link(v.home / "victim", dir / ".tmp-step-000000002.crashed");
  link(v.home / "victim", dir / ".del-step-000000003.x");
  Options o = options(dir.path());
  o.retention.keep_last = 1;
  Checkpointer ckpt(o);
  ckpt.save(m.state(100));
  link(v.home / "victim", dir / "step-000000100/extra");
  ckpt.save(m.state(200));  // removes step 100 with the link inside it
  v.expect_intact();
  EXPECT_EQ(names_in(dir.path()),
            (std::vector<std::string>{"latest", "step-000000001", "step-000000200"}));
  Retention keep_one;
  keep_one.keep_last = 1;
  EXPECT_EQ(prune(dir.path(), keep_one), std::vector<std::string>{});
  v.expect_intact();
}

TEST(CkptHostile, SavesKeepGoingToTheDirectoryFirstOpenedWhenItsPathIsSwapped) {
  TempDir top;
  TempDir elsewhere;
  const Model m;
  sys::make_dir(top / "ck");
  Options o = options(top / "ck");
  o.retention.keep_last = 1;
  Checkpointer ckpt(o);
  ckpt.save(m.state(100));
  // Whoever may rename entries of `top` moves the directory away and puts a link to a
  // directory of theirs in its place: the next save and its retention do not follow it.
  ASSERT_EQ(::rename((top / "ck").c_str(), (top / "moved").c_str()), 0);
  link(elsewhere.path(), top / "ck");
  ckpt.save(m.state(200));
  EXPECT_EQ(names_in(top / "moved"), (std::vector<std::string>{"latest", "step-000000200"}));
  EXPECT_EQ(names_in(elsewhere.path()), std::vector<std::string>{});
}

TEST(CkptHostile, ACheckpointDirectoryOthersMayRenameInIsRefused) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);
  try {
    Checkpointer ckpt(options(dir.path()));
    FAIL() << "a world-writable checkpoint directory was accepted";
  } catch (const SystemError& e) {
    EXPECT_STREQ(e.what(),
                 ("refusing checkpoint directory " + dir.path() +
                  ": mode 777 lets every user rename the checkpoints in it (chmod o-w, or +t)")
                     .c_str());
  }
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);  // sticky: only the owner renames
  EXPECT_NO_THROW(Checkpointer ckpt(options(dir.path())));
}

TEST(CkptHostile, ACheckpointDirectoryOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  TempDir dir;
  ASSERT_EQ(::chown(dir.path().c_str(), 4242, 4242), 0);
  try {
    Checkpointer ckpt(options(dir.path()));
    FAIL() << "another user's checkpoint directory was accepted";
  } catch (const SystemError& e) {
    EXPECT_STREQ(e.what(), ("refusing checkpoint directory " + dir.path() +
                            ": owned by uid 4242, not by this user (uid 0); its owner could "
                            "replace the checkpoints in it")
                               .c_str());
  }
  ASSERT_EQ(::chown(dir.path().c_str(), 0, 0), 0);  // TempDir removes it as its owner
}

TEST(CkptHostile, RemoveTreeRemovesLinksAsLinks) {
  Victim v;
  TempDir dir;
  sys::make_dir(dir / "t");
  sys::make_dir(dir / "t/d");
  link(v.home / "victim", dir / "t/d/into");
  link(v.home / "precious", dir / "t/file");
  fifo(dir / "t/pipe");
  sys::remove_tree(dir / "t");
  EXPECT_EQ(sys::file_type(dir / "t"), sys::FileType::missing);
  link(v.home / "victim", dir / "top");
  sys::remove_tree(dir / "top");
  EXPECT_EQ(sys::file_type(dir / "top"), sys::FileType::missing);
  v.expect_intact();
}

// The race a path-based walk loses: a directory being emptied is swapped for a link to
// the victim's directory between two of its entries. The walk goes on in the directory
// it opened; the link is never entered.
TEST(CkptHostile, RemoveTreeIsNotRedirectedByADirectorySwappedForALinkMidWay) {
  Victim v;
  test::write_bytes(v.home / "victim/f2", "keep");
  TempDir dir;
  sys::make_dir(dir / "t");
  sys::make_dir(dir / "t/d");
  test::write_bytes(dir / "t/d/f1", "1");
  test::write_bytes(dir / "t/d/f2", "2");
  sys::ScopedCalls restore;
  const auto real = sys::calls().unlink;
  bool swapped = false;
  sys::calls().unlink = [&](int dirfd, const char* name, int flags) {
    const int rc = real(dirfd, name, flags);
    if (!swapped && (std::string(name) == "f1" || std::string(name) == "f2")) {
      swapped = true;
      sys::rename_path(dir / "t/d", dir / "t/moved");
      link(v.home / "victim", dir / "t/d");
    }
    return rc;
  };
  try {
    sys::remove_tree(dir / "t");
  } catch (const SystemError&) {
    // Removing "d" as a directory fails once it is a link: fine, nothing was followed.
  }
  EXPECT_TRUE(swapped);
  v.expect_intact();
  EXPECT_EQ(sys::read_file(v.home / "victim/f2", 100), "keep");
}

// Item 6: each of these at the newest checkpoint's manifest or shard makes it unusable
// at once, and the older one is loaded.
class CkptNonRegular : public ::testing::Test {
 protected:
  void SetUp() override {
    Checkpointer ckpt(options(dir.path()));
    ckpt.save(m.state(100));
    ckpt.save(m.state(200));
  }
  void expect_falls_back() {
    LogCapture log;
    std::vector<float> w(m.w.size());
    const auto loaded = load_latest(dir.path(), {{"w", DType::f32, {w.size()}, w.data()}});
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->meta.step, 100u);
    EXPECT_EQ(w, m.w);
    EXPECT_EQ(latest_valid(dir.path(), Verify::full), dir / "step-000000100");
    if (quick_sees_it) {
      EXPECT_EQ(latest_valid(dir.path(), Verify::quick), dir / "step-000000100");
    }
    const auto listed = list_checkpoints(dir.path(), Verify::metadata);
    ASSERT_EQ(listed.size(), 2u);
    EXPECT_FALSE(listed[1].valid);
    EXPECT_FALSE(log.at(LogLevel::warning).empty());
  }
  std::string manifest() const { return dir / "step-000000200/manifest.json"; }
  std::string shard() const { return dir / "step-000000200/shard-00000-of-00001.h5"; }

  TempDir dir;
  Model m;
  bool quick_sees_it = true;  // Verify::quick checks types and sizes only
};

TEST_F(CkptNonRegular, AFifoAsManifest) {
  sys::remove_file(manifest());
  fifo(manifest());
  expect_falls_back();
}

TEST_F(CkptNonRegular, ALinkToDevZeroAsManifest) {
  sys::remove_file(manifest());
  link("/dev/zero", manifest());
  expect_falls_back();
}

TEST_F(CkptNonRegular, ASparseHugeManifest) {
  ASSERT_EQ(::truncate(manifest().c_str(), off_t{2} << 30), 0);
  expect_falls_back();
}

TEST_F(CkptNonRegular, AFifoAsShard) {
  sys::remove_file(shard());
  fifo(shard());
  expect_falls_back();
}

TEST_F(CkptNonRegular, ALinkToDevZeroAsShard) {
  sys::remove_file(shard());
  link("/dev/zero", shard());
  expect_falls_back();
}

TEST_F(CkptNonRegular, ASparseOneTebibyteShard) {
  ASSERT_EQ(::truncate(shard().c_str(), off_t{1} << 40), 0);
  expect_falls_back();
}

// The same with a manifest that agrees (as its user could write it): the 1 TiB outside
// the datasets would be hashed as HDF5 metadata, for hours.
TEST_F(CkptNonRegular, ASparseOneTebibyteShardTheManifestAgreesWith) {
  ASSERT_EQ(::truncate(shard().c_str(), off_t{1} << 40), 0);
  Manifest mf = manifest_from_json(sys::read_file(manifest(), 1 << 20), manifest());
  mf.shards[0].bytes = std::uint64_t{1} << 40;
  test::write_bytes(manifest(), manifest_to_json(mf));
  quick_sees_it = false;
  expect_falls_back();
}

TEST_F(CkptNonRegular, ALatestThatIsAFifoOrALinkIsIgnored) {
  sys::remove_file(dir / "latest");
  fifo(dir / "latest");
  EXPECT_EQ(read_latest(dir.path()), std::nullopt);
  sys::remove_file(dir / "latest");
  link("/dev/zero", dir / "latest");
  EXPECT_EQ(read_latest(dir.path()), std::nullopt);
  EXPECT_EQ(latest_valid(dir.path(), Verify::full), dir / "step-000000200");
}

}  // namespace
}  // namespace dl::ckpt
