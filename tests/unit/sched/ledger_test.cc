#include "sched/ledger.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "sched/priority.h"

namespace dl {
namespace {

TEST(Ledger, CountsTheCurrentRun) {
  ServiceLedger l;
  EXPECT_DOUBLE_EQ(l.attained(7, 1000), 0);
  l.running(7, 1000, 4, 1030);
  EXPECT_DOUBLE_EQ(l.attained(7, 1030), 120);
  EXPECT_DOUBLE_EQ(l.attained(7, 1100), 400);
}

TEST(Ledger, AddsUpRunsAndWaitsAcrossRequeues) {
  ServiceLedger l;
  l.pending(7, 900, 950);       // submitted at 900
  l.running(7, 1000, 2, 1050);  // waited 100 s
  EXPECT_DOUBLE_EQ(l.waited(7, 1050), 100);
  l.pending(7, 1200, 1100);                    // requeued; eligible again at 1200 (Slurm's delay)
  EXPECT_DOUBLE_EQ(l.attained(7, 5000), 100);  // counted up to when last seen running
  EXPECT_DOUBLE_EQ(l.waited(7, 1100), 100);
  l.pending(7, 1200, 1250);
  EXPECT_DOUBLE_EQ(l.waited(7, 1250), 150);
  l.running(7, 1300, 4, 1310);  // the second wait ended at its start
  EXPECT_DOUBLE_EQ(l.waited(7, 9999), 200);
  EXPECT_DOUBLE_EQ(l.attained(7, 1310), 140);
  l.stopped(7, 1320);  // done; Slurm knows the end
  EXPECT_DOUBLE_EQ(l.attained(7, 9999), 180);
}

TEST(Ledger, ARequeuedJobStillCompletingHasNotStartedWaiting) {
  // Submitted at 900, runs from 1000 on 4 GPUs, preempted at 1016. Slurm makes it
  // PENDING|COMPLETING at once but gives it a new SubmitTime (1017) and its BeginTime
  // after the requeue hold (1028) only when its nodes have cleaned up: a sample in
  // between must not count it waiting since 900 (its first wait again, and its run).
  ServiceLedger l;
  JobSnapshot s;
  s.pending = true;
  s.submit = 900;
  s.accrue = 900;
  l.observe(7, s, 950);
  s = {};
  s.running = true;
  s.start = 1000;
  s.gpus = 4;
  s.submit = 900;
  l.observe(7, s, 1010);
  s.running = false;
  s.pending = true;
  s.completing = true;
  s.requeued = true;
  s.end = 1016;
  s.gpus = 0;
  l.observe(7, s, 1016);
  l.observe(7, s, 1017);
  EXPECT_DOUBLE_EQ(l.waited(7, 1017), 100);
  EXPECT_DOUBLE_EQ(l.attained(7, 1017), 64);
  s.completing = false;
  s.submit = 1017;
  s.begin = 1028;
  s.accrue = 1028;
  l.observe(7, s, 1018);
  l.observe(7, s, 1050);
  EXPECT_DOUBLE_EQ(l.waited(7, 1050), 100 + 22);
  s = {};
  s.running = true;
  s.start = 1100;
  s.gpus = 4;
  l.observe(7, s, 1100);
  EXPECT_DOUBLE_EQ(l.waited(7, 1200), 100 + 72);
  EXPECT_DOUBLE_EQ(l.attained(7, 1110), 64 + 40);
}

TEST(Ledger, ARequeuedJobsRunEndsWhenSlurmResubmitsIt) {
  // Runs from 1000 on 4 GPUs, last seen running at 1015, preempted at 1016 and through
  // its requeue (SubmitTime 1016, BeginTime 1027) before the next sample: its run ended
  // at 1016 (as dl-sim counts it), not when it was last seen running.
  ServiceLedger l;
  JobSnapshot s;
  s.running = true;
  s.start = 1000;
  s.gpus = 4;
  s.submit = 900;
  l.observe(7, s, 1015);
  s = {};
  s.pending = true;
  s.requeued = true;
  s.submit = 1016;
  s.begin = 1027;
  s.accrue = 1027;
  l.observe(7, s, 1017);
  EXPECT_DOUBLE_EQ(l.attained(7, 1017), 64);
  l.observe(7, s, 1030);
  EXPECT_DOUBLE_EQ(l.attained(7, 1030), 64);
  EXPECT_DOUBLE_EQ(l.waited(7, 1030), 100 + 3);  // its first wait, from its first run
}

TEST(Ledger, APendingJobNeverRequeuedHasNoEntry) {
  // Most of a long queue: never ran, so its service is its wait since it became
  // eligible, known from the snapshot alone. Its first run starts its entry, with
  // that wait.
  ServiceLedger l;
  JobSnapshot s;
  s.pending = true;
  s.submit = 900;
  s.begin = 950;
  s.accrue = 950;
  Service got = l.observe(7, s, 1000);
  EXPECT_EQ(l.size(), 0u);
  EXPECT_DOUBLE_EQ(got.attained, 0);
  EXPECT_DOUBLE_EQ(got.waited, 50);
  EXPECT_EQ(got.gpus, 0u);
  EXPECT_DOUBLE_EQ(l.observe(7, s, 940).waited, 0);  // not eligible yet
  s.pending = false;
  s.running = true;
  s.start = 1100;
  s.gpus = 2;
  got = l.observe(7, s, 1110);
  EXPECT_EQ(l.size(), 1u);
  EXPECT_DOUBLE_EQ(got.attained, 20);
  EXPECT_DOUBLE_EQ(got.waited, 150);
  EXPECT_EQ(got.gpus, 2u);
  s = {};
  s.running = true;  // no submit time known: no wait made up
  s.start = 1100;
  EXPECT_DOUBLE_EQ(l.observe(8, s, 1110).waited, 0);
}

TEST(Ledger, ADependencyWaitIsNoWait) {
  // Submitted at 900 after a job it depends on: Slurm leaves its BeginTime and
  // accrue_time 0 until that job ends (at 1000), then sets both.
  ServiceLedger l;
  JobSnapshot s;
  s.pending = true;
  s.submit = 900;
  EXPECT_DOUBLE_EQ(l.observe(7, s, 990).waited, 0);
  s.begin = 1000;
  s.accrue = 1000;
  EXPECT_DOUBLE_EQ(l.observe(7, s, 1050).waited, 50);
  s = {};
  s.running = true;
  s.submit = 900;
  s.begin = 1000;  // accrue_time is 0 again once it runs, where Slurm enforces limits
  s.start = 1060;
  s.gpus = 1;
  EXPECT_DOUBLE_EQ(l.observe(7, s, 1070).waited, 60);
}

TEST(Ledger, ARequeuedJobNotAccruingIsNotWaiting) {
  // Requeued (SubmitTime 1016, BeginTime 1027), then not accruing age (its user is
  // over MaxJobsAccrue) until 1040.
  ServiceLedger l;
  JobSnapshot s;
  s.running = true;
  s.start = 1000;
  s.gpus = 4;
  s.submit = 900;
  s.accrue = 900;
  l.observe(7, s, 1015);
  s = {};
  s.pending = true;
  s.requeued = true;
  s.submit = 1016;
  s.begin = 1027;
  l.observe(7, s, 1017);
  l.observe(7, s, 1035);
  EXPECT_DOUBLE_EQ(l.waited(7, 1035), 100);
  s.accrue = 1040;
  l.observe(7, s, 1041);
  l.observe(7, s, 1050);
  EXPECT_DOUBLE_EQ(l.waited(7, 1050), 100 + 10);
}

TEST(Ledger, ANewStartTimeEndsAMissedRun) {
  ServiceLedger l;
  l.running(7, 1000, 1, 1100);
  l.running(7, 2000, 1, 2050);  // requeued and restarted between two samples
  EXPECT_DOUBLE_EQ(l.attained(7, 2050), 100 + 50);
}

TEST(Ledger, StoppedUnknownJobsAndSweeps) {
  ServiceLedger l;
  l.stopped(9, 100);
  EXPECT_EQ(l.size(), 0u);
  l.running(1, 10, 1, 20);
  l.running(2, 10, 1, 20);
  l.running(3, 10, 1, 20);
  l.begin_sweep();
  JobSnapshot running;
  running.running = true;
  running.start = 10;
  running.gpus = 1;
  l.observe(2, running, 30);
  JobSnapshot done;
  done.finished = true;
  done.end = 25;
  l.observe(3, done, 30);  // finished, not yet purged by Slurm: kept
  l.end_sweep();
  EXPECT_EQ(l.size(), 2u);
  EXPECT_DOUBLE_EQ(l.attained(1, 30), 0);  // purged: not seen in the sweep
  EXPECT_DOUBLE_EQ(l.attained(2, 30), 20);
  EXPECT_DOUBLE_EQ(l.attained(3, 30), 15);
  l.begin_sweep();
  l.end_sweep();  // a sweep that saw no job forgets them all
  EXPECT_EQ(l.size(), 0u);
}

TEST(Ledger, SerializeRoundTrips) {
  ServiceLedger l;
  l.pending(1, 900, 950);
  l.running(1, 1000, 2, 1100);
  l.stopped(1, 1100);
  l.running(2, 1500, 8, 1600);
  l.pending(3, 1700, 1800);
  const auto text = l.serialize();
  const auto back = ServiceLedger::parse(text);
  EXPECT_EQ(back.size(), 3u);
  EXPECT_DOUBLE_EQ(back.attained(1, 9999), 200);
  EXPECT_DOUBLE_EQ(back.waited(1, 9999), 100);
  EXPECT_DOUBLE_EQ(back.attained(2, 1700), 1600);
  EXPECT_DOUBLE_EQ(back.waited(3, 1900), 200);
  EXPECT_EQ(back.serialize(), text);
  EXPECT_EQ(ServiceLedger::parse(ServiceLedger().serialize()).size(), 0u);
}

TEST(Ledger, ParseRejectsDamagedState) {
  ServiceLedger l;
  l.running(1, 1000, 2, 1100);
  const auto text = l.serialize();
  EXPECT_THROW(ServiceLedger::parse(""), InputError);
  EXPECT_THROW(ServiceLedger::parse(text.substr(0, text.size() - 5)), InputError);
  auto edited = text;
  edited[edited.find("1000")] = '2';
  EXPECT_THROW(ServiceLedger::parse(edited), InputError);
  auto other = text;
  other.replace(other.find("end 1"), 5, "end 2");
  EXPECT_THROW(ServiceLedger::parse(other), InputError);
}

TEST(Ledger, ObserveGivesTheServiceAfterTheSample) {
  ServiceLedger l;
  JobSnapshot s;
  s.pending = true;
  s.submit = 1000;
  s.accrue = 1000;
  Service got = l.observe(7, s, 1100);
  EXPECT_DOUBLE_EQ(got.waited, 100);
  EXPECT_DOUBLE_EQ(got.attained, 0);
  s = {};
  s.running = true;
  s.submit = 1000;
  s.start = 1100;
  s.gpus = 4;
  got = l.observe(7, s, 1150);
  EXPECT_DOUBLE_EQ(got.waited, 100);
  EXPECT_DOUBLE_EQ(got.attained, 200);
  EXPECT_EQ(got.gpus, 4u);
  s = {};
  s.finished = true;
  s.end = 1160;
  got = l.observe(7, s, 1200);
  EXPECT_DOUBLE_EQ(got.attained, 240);
  EXPECT_DOUBLE_EQ(got.attained, l.attained(7, 1200));
  EXPECT_DOUBLE_EQ(l.observe(8, s, 1200).attained, 0);  // never seen: nothing to count
  EXPECT_EQ(l.size(), 1u);
}

TEST(Ledger, RemembersTheGpusOfTheLatestRun) {
  ServiceLedger l;
  EXPECT_EQ(l.gpus(7), 0u);
  l.running(7, 1000, 4, 1010);
  EXPECT_EQ(l.gpus(7), 4u);
  EXPECT_EQ(ServiceLedger::parse(l.serialize()).gpus(7), 4u);
}

// ---- carried service: it follows the work, not the job id

JobSnapshot ran(std::int64_t start, std::uint32_t gpus) {
  JobSnapshot s;
  s.running = true;
  s.start = start;
  s.submit = start;
  s.gpus = gpus;
  return s;
}

JobSnapshot finished(std::int64_t end) {
  JobSnapshot s;
  s.finished = true;
  s.end = end;
  return s;
}

JobSnapshot waiting(std::int64_t accrue) {
  JobSnapshot s;
  s.pending = true;
  s.accrue = accrue;
  return s;
}

WorkOf work(std::uint32_t uid, std::string own, std::string resume = "") {
  return [=] { return std::optional<Work>(Work{uid, own, resume}); };
}

// Job 1 of uid 1000 runs 1000 s on 4 GPUs in its default directory, then is cancelled.
ServiceLedger after_first_job() {
  ServiceLedger l;
  const auto w = work(1000, "1");
  l.observe(1, ran(1000, 4), 1000, &w);
  l.observe(1, finished(2000), 2000, &w);
  return l;
}

TEST(LedgerCarry, AResumedJobStartsWithTheService) {
  auto l = after_first_job();
  const auto w = work(1000, "2", "/ckpt/alice/1");
  EXPECT_DOUBLE_EQ(l.observe(2, waiting(2000), 2000, &w).attained, 4000);
  EXPECT_DOUBLE_EQ(l.observe(2, ran(2100, 4), 2200, &w).attained, 4400);
}

TEST(LedgerCarry, ANewJobOfTheSameUserStartsAtZero) {
  auto l = after_first_job();
  const auto w = work(1000, "2");
  const auto s = l.observe(2, waiting(2000), 2100, &w);
  EXPECT_DOUBLE_EQ(s.attained, 0);
  EXPECT_DOUBLE_EQ(s.waited, 100);
  EXPECT_EQ(l.size(), 1u);  // no entry for it
}

TEST(LedgerCarry, TheSameCheckpointDirIsTheSameWork) {
  ServiceLedger l;
  const auto w1 = work(1000, "/scratch/run");
  l.observe(1, ran(1000, 2), 1000, &w1);
  l.observe(1, finished(1500), 1500, &w1);
  const auto w2 = work(1000, "/scratch/run");
  EXPECT_DOUBLE_EQ(l.observe(2, ran(1500, 2), 1500, &w2).attained, 1000);
}

TEST(LedgerCarry, AnotherUserNamingThePathInheritsNothing) {
  auto l = after_first_job();
  const auto w = work(2000, "2", "/ckpt/alice/1");
  EXPECT_DOUBLE_EQ(l.observe(2, ran(2000, 4), 2000, &w).attained, 0);
}

TEST(LedgerCarry, AChainOfResumesKeepsAddingUp) {
  auto l = after_first_job();
  const auto w2 = work(1000, "2", "1");
  l.observe(2, ran(2000, 4), 2000, &w2);
  l.observe(2, finished(3000), 3000, &w2);  // 4000 carried + 4000 its own
  // Resuming from the first job's directory again still carries both runs.
  const auto w3 = work(1000, "3", "/ckpt/alice/1");
  EXPECT_DOUBLE_EQ(l.observe(3, ran(3000, 4), 3000, &w3).attained, 8000);
}

TEST(LedgerCarry, CarriedServiceHalvesEachHalfLife) {
  auto l = after_first_job();
  CarryParams c;
  c.half_life_s = 1000;
  l.set_carry(c);
  const Work w{1000, "2", "1"};
  EXPECT_DOUBLE_EQ(l.carried(w, 2000), 4000);
  EXPECT_DOUBLE_EQ(l.carried(w, 3000), 2000);
  EXPECT_DOUBLE_EQ(l.carried(w, 4000), 1000);
}

TEST(LedgerCarry, AccountsExpireAndAreBounded) {
  ServiceLedger l;
  CarryParams c;
  c.half_life_s = 1000;
  c.floor_gpu_s = 100;
  c.max_accounts = 2;
  l.set_carry(c);
  for (std::uint32_t job = 1; job <= 3; ++job) {
    const auto w = work(1000, std::to_string(job));
    l.observe(job, ran(1000, job), 1000, &w);
    l.observe(job, finished(2000), 2000, &w);
  }
  EXPECT_EQ(l.accounts(), 2u);  // the smallest (job 1's) went
  EXPECT_DOUBLE_EQ(l.carried({1000, "1", ""}, 2000), 0);
  EXPECT_DOUBLE_EQ(l.carried({1000, "3", ""}, 2000), 3000);
  l.expire(6000);  // four half-lives: 125 and 187.5 GPU-s, above the floor
  EXPECT_EQ(l.accounts(), 2u);
  l.expire(6500);  // 88 and 133
  EXPECT_EQ(l.accounts(), 1u);
  l.expire(7000);
  EXPECT_EQ(l.accounts(), 0u);
}

TEST(LedgerCarry, APurgedJobCarriesItsService) {
  ServiceLedger l;
  const auto w = work(1000, "/scratch/run");
  l.begin_sweep();
  l.observe(1, ran(1000, 2), 1500, &w);
  l.end_sweep();
  l.begin_sweep();
  l.end_sweep();  // purged while running, never seen finished
  EXPECT_EQ(l.size(), 0u);
  EXPECT_DOUBLE_EQ(l.carried({1000, "/scratch/run", ""}, 1500), 1000);
}

TEST(LedgerCarry, SerializeRoundTripsCarriedService) {
  auto l = after_first_job();
  const auto w = work(1000, "/a dir/with spaces", "1");
  l.observe(2, ran(2000, 4), 2100, &w);
  const auto text = l.serialize();
  const auto back = ServiceLedger::parse(text);
  EXPECT_EQ(back.serialize(), text);
  EXPECT_EQ(back.accounts(), 1u);
  EXPECT_DOUBLE_EQ(back.attained(2, 2100), 4400);
  EXPECT_DOUBLE_EQ(back.carried({1000, "x", "/ckpt/alice/1"}, 2000), 4000);
  auto upper = text;
  const auto at = upper.find("2f61");  // "/a" in hex
  upper.replace(at, 4, "2F61");
  EXPECT_THROW(ServiceLedger::parse(upper), InputError);
}

TEST(LedgerCarry, ReadsAVersionOneStateFile) {
  const std::string body = "7 200 0 0 2 100 0 0\n";
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : body) {
    h ^= c;
    h *= 1099511628211ull;
  }
  const auto text =
      "slurm-dl service-ledger 1\n" + body + "end 1 " + fmt::format("{:016x}", h) + "\n";
  const auto l = ServiceLedger::parse(text);
  EXPECT_EQ(l.size(), 1u);
  EXPECT_DOUBLE_EQ(l.attained(7, 0), 200);
  EXPECT_EQ(l.accounts(), 0u);
}

// ---- the service of finished jobs, for queues=pNN

std::string with_checksum(const std::string& header, const std::string& body,
                          const std::string& counts) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : body) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return header + "\n" + body + "end " + counts + " " + fmt::format("{:016x}", h) + "\n";
}

// The service of the ledger's finished jobs, oldest first.
std::vector<double> services(const ServiceLedger& l) {
  std::vector<double> out;
  for (const auto& f : l.finished().jobs()) out.push_back(f.gpu_s);
  return out;
}

TEST(LedgerFinished, EachFinishedJobOnceWithItsWholeServiceAndOwner) {
  ServiceLedger l;
  l.observe(1, ran(1000, 4), 1000);
  JobSnapshot done = finished(1100);
  done.uid = 1001;
  l.observe(1, done, 1130);
  l.observe(1, done, 1160);  // seen again at the next samples
  // Ran between two samples: the one run Slurm shows.
  JobSnapshot quick = finished(2010);
  quick.start = 2000;
  quick.gpus = 2;
  quick.uid = 1002;
  l.observe(2, quick, 2030);
  l.observe(2, quick, 2060);
  // Never ran (cancelled while pending), or ran on no GPU: not counted.
  l.observe(3, finished(2100), 2130);
  JobSnapshot cpu = finished(2100);
  cpu.start = 2000;
  l.observe(4, cpu, 2130);
  EXPECT_EQ(services(l), (std::vector<double>{400, 20}));
  ASSERT_EQ(l.finished().size(), 2u);
  EXPECT_EQ(l.finished().jobs()[0].user, 1001u);
  EXPECT_EQ(l.finished().jobs()[0].end, 1130);  // when the ledger saw it finished
  EXPECT_EQ(l.finished().jobs()[1].user, 1002u);
  EXPECT_EQ(l.finished().jobs()[1].end, 2030);
}

TEST(LedgerFinished, KeepsTheMostRecentWindow) {
  ServiceLedger l;
  for (std::uint32_t job = 1; job <= kAdaptWindow + 5; ++job) {
    JobSnapshot s = finished(1000 + job);
    s.start = 1000;
    s.gpus = 1;
    l.observe(job, s, 5000);
  }
  const auto got = services(l);
  ASSERT_EQ(got.size(), kAdaptWindow);
  EXPECT_DOUBLE_EQ(got.front(), 6);
  EXPECT_DOUBLE_EQ(got.back(), kAdaptWindow + 5.0);
  // Seen again, a job in the window is not counted again.
  JobSnapshot again = finished(1000 + kAdaptWindow + 5);
  again.start = 1000;
  again.gpus = 1;
  l.observe(kAdaptWindow + 5, again, 5030);
  EXPECT_EQ(services(l).size(), kAdaptWindow);
  EXPECT_DOUBLE_EQ(services(l).back(), kAdaptWindow + 5.0);
}

TEST(LedgerFinished, SavedAndRestored) {
  ServiceLedger l;
  l.observe(1, ran(1000, 4), 1000);
  JobSnapshot done = finished(1100);
  done.uid = 1001;
  l.observe(1, done, 1130);
  l.observe(2, ran(1000, 1), 1000);
  const auto text = l.serialize();
  EXPECT_NE(text.find("\nf 1 1001 400 1130\n"), std::string::npos);
  auto back = ServiceLedger::parse(text);
  EXPECT_EQ(back.serialize(), text);
  EXPECT_EQ(services(back), (std::vector<double>{400}));
  EXPECT_EQ(back.finished().jobs_of(1001), 1u);
  back.observe(1, done, 1160);  // still counted once after a restart
  EXPECT_EQ(services(back), (std::vector<double>{400}));
  // A finished job before an entry, a duplicate, a wrong count or a missing field:
  // damaged.
  const std::string v4 = "slurm-dl service-ledger 4";
  EXPECT_THROW(ServiceLedger::parse(
                   with_checksum(v4, "f 1 1001 400 1130\n2 0 1000 1000 1 0 0 0 0 -\n", "1 0 1")),
               InputError);
  EXPECT_THROW(
      ServiceLedger::parse(with_checksum(v4, "f 1 1001 400 1130\nf 1 1001 400 1130\n", "0 0 2")),
      InputError);
  EXPECT_THROW(ServiceLedger::parse(with_checksum(v4, "f 1 1001 400 1130\n", "0 0 2")), InputError);
  EXPECT_THROW(ServiceLedger::parse(with_checksum(v4, "f 1 400 1130\n", "0 0 1")), InputError);
}

TEST(LedgerFinished, ReadsVersionsThreeAndTwo) {
  // Version 3 did not keep owners or ends: its finished jobs weigh as one user and
  // ended at the last time the file knows.
  const auto v3 = ServiceLedger::parse(with_checksum(
      "slurm-dl service-ledger 3", "7 200 0 0 2 100 1000 1500 0 -\nf 1 400\nf 2 20\n", "1 0 2"));
  EXPECT_EQ(v3.size(), 1u);
  EXPECT_EQ(services(v3), (std::vector<double>{400, 20}));
  EXPECT_EQ(v3.finished().users(), 1u);
  EXPECT_EQ(v3.finished().jobs().back().end, 1500);
  const auto v2 = ServiceLedger::parse(
      with_checksum("slurm-dl service-ledger 2", "7 200 0 0 2 100 0 0 0 -\n", "1 0"));
  EXPECT_EQ(v2.size(), 1u);
  EXPECT_DOUBLE_EQ(v2.attained(7, 0), 200);
  EXPECT_EQ(v2.finished().size(), 0u);
}

}  // namespace
}  // namespace dl
