#include "core/attained.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace dl {
namespace {

TEST(Attained, CountsTheCurrentRun) {
  AttainedService a;
  EXPECT_DOUBLE_EQ(a.attained(7, 1000), 0);
  a.running(7, 1000, 4, 1030);
  EXPECT_DOUBLE_EQ(a.attained(7, 1030), 120);
  EXPECT_DOUBLE_EQ(a.attained(7, 1100), 400);
}

TEST(Attained, AddsUpRunsAcrossRequeues) {
  AttainedService a;
  a.running(7, 1000, 2, 1050);
  a.stopped(7, 1060);  // Slurm still knows the end time
  EXPECT_DOUBLE_EQ(a.attained(7, 5000), 120);
  a.running(7, 2000, 2, 2000);
  a.stopped(7, 0);  // requeued: the end time is gone; counted up to last seen
  EXPECT_DOUBLE_EQ(a.attained(7, 9000), 120);
  a.running(7, 3000, 4, 3010);
  EXPECT_DOUBLE_EQ(a.attained(7, 3010), 160);
}

TEST(Attained, ANewStartTimeBanksAMissedEnd) {
  AttainedService a;
  a.running(7, 1000, 1, 1100);
  a.running(7, 2000, 1, 2050);  // requeued and restarted between two samples
  EXPECT_DOUBLE_EQ(a.attained(7, 2050), 100 + 50);
}

TEST(Attained, StoppedUnknownJobsAndRetain) {
  AttainedService a;
  a.stopped(9, 100);
  EXPECT_EQ(a.size(), 0u);
  a.running(1, 10, 1, 20);
  a.running(2, 10, 1, 20);
  a.retain([](std::uint32_t job) { return job == 2; });
  EXPECT_EQ(a.size(), 1u);
  EXPECT_DOUBLE_EQ(a.attained(1, 20), 0);
  EXPECT_DOUBLE_EQ(a.attained(2, 20), 10);
}

TEST(Attained, SerializeRoundTrips) {
  AttainedService a;
  a.running(1, 1000, 2, 1100);
  a.stopped(1, 1100);
  a.running(2, 1500, 8, 1600);
  const auto text = a.serialize();
  const auto b = AttainedService::parse(text);
  EXPECT_EQ(b.size(), 2u);
  EXPECT_DOUBLE_EQ(b.attained(1, 9999), 200);
  EXPECT_DOUBLE_EQ(b.attained(2, 1700), 1600);
  EXPECT_EQ(b.serialize(), text);
  EXPECT_EQ(AttainedService::parse(AttainedService().serialize()).size(), 0u);
}

TEST(Attained, ParseRejectsDamagedState) {
  AttainedService a;
  a.running(1, 1000, 2, 1100);
  const auto text = a.serialize();
  EXPECT_THROW(AttainedService::parse(""), InputError);
  EXPECT_THROW(AttainedService::parse(text.substr(0, text.size() - 5)), InputError);
  auto edited = text;
  edited[edited.find("1000")] = '2';
  EXPECT_THROW(AttainedService::parse(edited), InputError);
  auto other = text;
  other.replace(other.find("end 1"), 5, "end 2");
  EXPECT_THROW(AttainedService::parse(other), InputError);
}

}  // namespace
}  // namespace dl
