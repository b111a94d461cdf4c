// The C++ client API (dl/client.h) against a channel page as dlrun sets it up. The
// client maps DL_CLIENT_FILE once per process, so every scenario runs in its own child
// process (EXPECT_EXIT).
#include "dl/client.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "client/channel.h"

namespace {

using dl::channel::Page;

// What dlrun does before it starts the program (launcher/channel_file.cc).
Page* make_page(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, dl::channel::kSize) != 0) std::abort();
  void* p = mmap(nullptr, dl::channel::kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) std::abort();
  auto* page = new (p) Page{};
  page->magic = dl::channel::kMagic;
  page->version = dl::channel::kVersion;
  page->size = dl::channel::kSize;
  page->step = -1;
  page->done_step = -1;
  page->metrics_step = -1;
  return page;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "dl-client-test-" + std::to_string(getpid());
    page_ = make_page(path_);
  }
  void TearDown() override { unlink(path_.c_str()); }
  void use_page() { setenv("DL_CLIENT_FILE", path_.c_str(), 1); }

  std::string path_;
  Page* page_ = nullptr;
};

#define CHECK_OR_DIE(cond)                                               \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      _exit(1);                                                          \
    }                                                                    \
  } while (0)

TEST_F(ClientTest, OutsideDlrunEverythingIsANoOp) {
  EXPECT_EXIT(
      {
        unsetenv("DL_CLIENT_FILE");
        setenv("DL_RESUME_FROM", "/ckpt/step-000000042", 1);
        dl::report_step(5);
        dl::report_metrics(5, {{"loss", 1.5}});
        dl::checkpoint_done(5);
        CHECK_OR_DIE(!dl::should_checkpoint());
        CHECK_OR_DIE(dl::resume_path() == std::string("/ckpt/step-000000042"));
        unsetenv("DL_RESUME_FROM");
        CHECK_OR_DIE(!dl::resume_path());
        fprintf(stderr, "ok\n");
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "ok");
}

TEST_F(ClientTest, SearchHparamsAndBudget) {
  EXPECT_EXIT(
      {
        unsetenv("DL_HPARAMS");
        unsetenv("DL_MAX_STEPS");
        CHECK_OR_DIE(dl::hparams_json() == "{}");
        CHECK_OR_DIE(!dl::max_steps());
        setenv("DL_HPARAMS", "{\"lr\":0.01}", 1);
        setenv("DL_MAX_STEPS", "16", 1);
        CHECK_OR_DIE(dl::hparams_json() == "{\"lr\":0.01}");
        CHECK_OR_DIE(dl::max_steps() == 16);
        setenv("DL_MAX_STEPS", "16x", 1);
        try {
          dl::max_steps();
          _exit(1);
        } catch (const std::invalid_argument& e) {
          CHECK_OR_DIE(std::string(e.what()) ==
                       "dl: DL_MAX_STEPS=16x: expected a whole number of steps >= 1");
        }
        fprintf(stderr, "ok\n");
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "ok");
}

// In-job continuation (dl-search's continue_in_job): max_steps() follows the decisions of
// this job; next_max_steps() returns the driver's "continue", and without a decision in
// time creates "end" itself and returns nothing.
TEST_F(ClientTest, SearchContinuationDecisions) {
  EXPECT_EXIT(
      {
        char dir_template[] = "/tmp/dl-client-test.XXXXXX";
        const char* dir = mkdtemp(dir_template);
        CHECK_OR_DIE(dir != nullptr);
        const std::string d(dir);
        setenv("DL_SEARCH_DECISIONS", dir, 1);
        setenv("DL_SEARCH_TRIAL", "t001", 1);
        setenv("SLURM_JOB_ID", "42", 1);
        setenv("DL_SEARCH_RUNG", "0", 1);
        setenv("DL_MAX_STEPS", "2", 1);
        setenv("DL_SEARCH_RUNGS", "2,4,8", 1);
        setenv("DL_SEARCH_WAIT", "0.2", 1);
        unsetenv("RANK");
        CHECK_OR_DIE(dl::max_steps() == 2);
        // The driver decided that this job continues to rung 1 (a requeued job finds it).
        FILE* f = fopen((d + "/t001.42.r0").c_str(), "w");
        CHECK_OR_DIE(f != nullptr);
        fputs("continue 1 4\n", f);
        fclose(f);
        CHECK_OR_DIE(dl::max_steps() == 4);
        // At the end of rung 1 no decision comes: the trial decides "end" itself.
        CHECK_OR_DIE(!dl::next_max_steps());
        CHECK_OR_DIE(access((d + "/t001.42.r1.wait").c_str(), F_OK) == 0);
        f = fopen((d + "/t001.42.r1").c_str(), "r");
        CHECK_OR_DIE(f != nullptr);
        char buf[16] = {};
        CHECK_OR_DIE(fgets(buf, sizeof buf, f) != nullptr && std::string(buf) == "end\n");
        fclose(f);
        // The driver answers the marker with "continue" to rung 2.
        setenv("SLURM_JOB_ID", "43", 1);
        setenv("DL_SEARCH_RUNG", "1", 1);
        setenv("DL_MAX_STEPS", "4", 1);
        setenv("DL_SEARCH_WAIT", "30", 1);
        std::thread driver([&] {
          while (access((d + "/t001.43.r1.wait").c_str(), F_OK) != 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          FILE* w = fopen((d + "/t001.43.r1.tmp").c_str(), "w");
          fputs("continue 2 8\n", w);
          fclose(w);
          rename((d + "/t001.43.r1.tmp").c_str(), (d + "/t001.43.r1").c_str());
        });
        CHECK_OR_DIE(dl::next_max_steps() == 8);
        driver.join();
        CHECK_OR_DIE(dl::max_steps() == 8);
        CHECK_OR_DIE(!dl::next_max_steps());  // the last rung: nothing to ask
        fprintf(stderr, "ok\n");
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "ok");
}

TEST_F(ClientTest, ReportStepWaitsForTheAgreedStep) {
  EXPECT_EXIT(
      {
        use_page();
        dl::report_step(9);
        CHECK_OR_DIE(page_->step == 9);
        // dlrun starts a round; the program must stop at its next step until the
        // target is known.
        page_->request_seq = 1;
        std::thread dlrun([&] {
          while (page_->frozen_seq.load() != 1) std::this_thread::yield();
          CHECK_OR_DIE(page_->step.load() == 10);
          page_->target_step = 10;
          page_->target_seq = 1;
        });
        dl::report_step(10);
        dlrun.join();
        CHECK_OR_DIE(dl::should_checkpoint());
        CHECK_OR_DIE(dl::should_checkpoint());  // until checkpoint_done
        dl::checkpoint_done(10);
        CHECK_OR_DIE(!dl::should_checkpoint());
        CHECK_OR_DIE(page_->done_step == 10 && page_->done_seq == 1);
        dl::report_step(11);  // no round pending: no wait
        fprintf(stderr, "ok\n");
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "ok");
}

TEST_F(ClientTest, ARankBehindTheTargetCheckpointsWhenItGetsThere) {
  EXPECT_EXIT(
      {
        use_page();
        dl::report_step(10);
        page_->request_seq = 1;
        page_->target_step = 11;
        page_->target_seq = 1;
        CHECK_OR_DIE(!dl::should_checkpoint());
        dl::report_step(11);
        CHECK_OR_DIE(dl::should_checkpoint());
        dl::checkpoint_done(11);
        CHECK_OR_DIE(!dl::should_checkpoint());
        fprintf(stderr, "ok\n");
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "ok");
}

TEST_F(ClientTest, ACheckpointOfItsOwnIsRecordedButSatisfiesNoRequest) {
  EXPECT_EXIT(
      {
        use_page();
        dl::report_step(3);
        dl::checkpoint_done(3);
        CHECK_OR_DIE(page_->done_step == 3 && page_->done_seq == 0);
        fprintf(stderr, "ok\n");
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "ok");
}

TEST_F(ClientTest, MetricsAreWrittenUnderTheSeqlock) {
  EXPECT_EXIT(
      {
        use_page();
        dl::report_metrics(7, {{"loss", 0.25}, {"acc", 0.9}});
        CHECK_OR_DIE(page_->metrics_seq == 2);
        CHECK_OR_DIE(page_->metrics_step == 7);
        CHECK_OR_DIE(std::string(page_->metrics) == "acc=0.9 loss=0.25");
        fprintf(stderr, "ok\n");
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "ok");
}

TEST_F(ClientTest, BadArgumentsAreRejected) {
  use_page();
  EXPECT_THROW(dl::report_step(-1), std::invalid_argument);
  EXPECT_THROW(dl::checkpoint_done(-3), std::invalid_argument);
  EXPECT_THROW(dl::report_metrics(1, {{"bad name", 1.0}}), std::invalid_argument);
  EXPECT_THROW(dl::report_metrics(1, {{"loss", 1.0 / 0.0}}), std::invalid_argument);
}

TEST_F(ClientTest, AFileThatIsNotAChannelIsAnError) {
  EXPECT_EXIT(
      {
        const std::string other = path_ + ".other";
        const int fd = open(other.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
        CHECK_OR_DIE(fd >= 0 && ftruncate(fd, 4096) == 0);
        setenv("DL_CLIENT_FILE", other.c_str(), 1);
        try {
          dl::should_checkpoint();
        } catch (const std::runtime_error& e) {
          fprintf(stderr, "%s\n", e.what());
          unlink(other.c_str());
          _exit(0);
        }
        _exit(1);
      },
      ::testing::ExitedWithCode(0), "DL_CLIENT_FILE=.*other is not a dlrun channel of version 1");
}

}  // namespace
