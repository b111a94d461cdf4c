#include "sched/sim/backfill.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace dl::sim {
namespace {

using Want = std::vector<std::pair<std::uint32_t, std::uint32_t>>;  // (node, GPUs)

// Free GPUs: 2 now, 1 more at 30 (a slot: 60), 2 more at 100 (120), 4 more at 200 (240).
Profile steps() { return Profile(0, 60, 2, {{100, 2}, {30, 1}, {200, 4}}); }

TEST(Profile, EarliestFindsTheFirstWindowWithTheGpusFreeThroughout) {
  struct Case {
    std::int64_t gpus;
    double seconds, from, before, want;
  };
  const Case cases[] = {
      {2, 1000, 0, kInf, 0},  {3, 100, 0, kInf, 60},    {5, 50, 0, kInf, 120},
      {9, 1, 0, kInf, 240},   {9, 1, 0, 200, kInf},     {10, 1, 0, kInf, kInf},
      {3, 100, 70, kInf, 70}, {5, 50, 130, 130.5, 130}, {2, 10, 0, 0.5, 0},
  };
  const Profile p = steps();
  for (const auto& c : cases) {
    EXPECT_EQ(p.earliest(c.gpus, c.seconds, c.from, c.before), c.want)
        << c.gpus << " GPUs for " << c.seconds << " s from " << c.from;
  }
}

TEST(Profile, WindowEndIsWhenTooFewGpusAreFree) {
  struct Case {
    std::int64_t gpus;
    double from, want;
  };
  const Case cases[] = {{3, 0, 0}, {2, 0, kInf}, {4, 70, 70}, {3, 70, kInf}, {6, 130, 130}};
  const Profile p = steps();
  for (const auto& c : cases) {
    EXPECT_EQ(p.window_end(c.gpus, c.from), c.want) << c.gpus << " GPUs from " << c.from;
  }
}

TEST(Profile, OccupyTakesWholeSlotsAndWindowsMustNotCrossADip) {
  Profile p = steps();
  p.occupy(0, 130, 2);    // [0, 180): 0, 1, 3 free
  p.occupy(240, 300, 8);  // [240, 300): 1 free
  struct Case {
    std::int64_t gpus;
    double seconds, want;
  };
  const Case cases[] = {{1, 60, 60},  {2, 60, 120},  {2, 100, 120}, {2, 200, 300},
                        {4, 60, 180}, {4, 100, 300}, {9, 1, 300},   {10, 1, kInf}};
  for (const auto& c : cases) {
    EXPECT_EQ(p.earliest(c.gpus, c.seconds, 0, kInf), c.want) << c.gpus << " GPUs, " << c.seconds;
  }
  EXPECT_EQ(p.window_end(1, 0), 0);
  EXPECT_EQ(p.window_end(2, 200), 240);
}

TEST(Profile, SlotsCountFromNow) {
  Profile p(10, 60, 0, {{15, 4}});  // free from 70
  EXPECT_EQ(p.earliest(4, 1, 0, kInf), 70);
  p.occupy(100, 101, 4);  // [70, 130)
  EXPECT_EQ(p.earliest(4, 1, 0, kInf), 130);
}

// The simulation as a backfill pass sees it, at time 0: jobs, free GPUs, what it starts.
class FakeHost final : public BackfillHost {
 public:
  explicit FakeHost(std::vector<std::uint32_t> free) : free_(std::move(free)) {
    for (const auto f : free_) free_total_ += f;
  }
  void add_running(const std::vector<Alloc>& alloc, double est_end) {
    Job j;
    j.state = State::running;
    j.est_end = est_end;
    for (const auto& a : alloc) {
      j.hold += a.gpus;
      free_[a.node] -= a.gpus;
      free_total_ -= a.gpus;
    }
    j.alloc = alloc;
    running_.push_back(static_cast<std::uint32_t>(jobs_.size()));
    jobs_.push_back(std::move(j));
  }
  // A pending job of `nodes` x `per_node` GPUs (fifo-backfill: 1 x GPUs); returns its index.
  std::uint32_t add_pending(std::uint32_t nodes, std::uint32_t per_node, double limit) {
    Job j;
    j.state = State::pending;
    j.nodes = nodes;
    j.per_node = per_node;
    j.hold = nodes * per_node;
    j.limit = limit;
    jobs_.push_back(std::move(j));
    return static_cast<std::uint32_t>(jobs_.size() - 1);
  }
  std::vector<std::pair<std::uint32_t, Want>> started;

  double now() const override { return 0; }
  const std::vector<Job>& jobs() const override { return jobs_; }
  const std::vector<std::uint32_t>& running() const override { return running_; }
  const std::vector<std::uint32_t>& free() const override { return free_; }
  std::int64_t free_total() const override { return free_total_; }
  std::vector<Alloc> place(std::uint32_t i, const std::vector<std::uint32_t>& off) const override {
    auto free = free_;
    for (const auto k : off) free[k] = 0;
    return place_dl(free, jobs_[i].nodes, jobs_[i].per_node, {}, 0);
  }
  void start(std::uint32_t i, const std::vector<Alloc>& alloc, std::optional<double>) override {
    Want got;
    for (const auto& a : alloc) {
      got.emplace_back(a.node, a.gpus);
      free_[a.node] -= a.gpus;
      free_total_ -= a.gpus;
    }
    started.emplace_back(i, got);
    jobs_[i].state = State::running;
    jobs_[i].alloc = alloc;
    jobs_[i].est_end = jobs_[i].limit;
    running_.push_back(i);
  }
  std::vector<std::uint32_t> victim_candidates(std::uint32_t) const override { return {}; }
  Simulator::Decision preempt_for(std::uint32_t, const std::vector<char>&) const override {
    return {};
  }
  void preempt(std::uint32_t) override { ADD_FAILURE() << "no preemption here"; }

 private:
  std::vector<Job> jobs_;
  std::vector<std::uint32_t> running_;
  std::vector<std::uint32_t> free_;
  std::int64_t free_total_ = 0;
};

Options cluster(Policy policy, std::uint32_t nodes, std::uint32_t gpus) {
  Options o;
  o.policy = policy;
  o.nodes = nodes;
  o.gpus_per_node = gpus;
  return o;
}

TEST(Backfill, SlurmsPassKeepsLowerJobsOffTheNodesReservedForAHigherOne) {
  // 2 nodes x 4 GPUs, 2 free on node 0 until 1000, node 1 busy until 1000. H (4 GPUs)
  // reserves node 0 from 1000, rounded down to bf_resolution on the controller's clock;
  // C (2 GPUs, 5000 s) would run into it and waits; D (2 GPUs) starts on node 0 if it
  // ends by the reservation's start.
  struct Case {
    double d_limit, clock_offset;
    Want d_starts;
  };
  const Case cases[] = {
      {60, 0, {{0, 2}}},    // ends long before 1000
      {960, 0, {{0, 2}}},   // the reservation begins at 960
      {990, 0, {}},         // would run 30 s into it
      {990, 30, {{0, 2}}},  // begins at 990 on a clock 30 s ahead
  };
  for (const auto& c : cases) {
    Options o = cluster(Policy::fifo_backfill, 2, 4);
    o.clock_offset_s = c.clock_offset;
    FakeHost host({4, 4});
    host.add_running({{0, 2}}, 1000);
    host.add_running({{1, 4}}, 1000);
    const auto h = host.add_pending(1, 4, 100);
    const auto cc = host.add_pending(1, 2, 5000);
    const auto d = host.add_pending(1, 2, c.d_limit);
    backfill_pass(host, o, {h, cc, d});
    std::vector<std::pair<std::uint32_t, Want>> want;
    if (!c.d_starts.empty()) want.emplace_back(d, c.d_starts);
    EXPECT_EQ(host.started, want) << "D's limit " << c.d_limit << ", offset " << c.clock_offset;
  }
}

TEST(Backfill, SlurmsPassPlacesDlShapesAsConsTresAndReservesTheirNodes) {
  // 4 nodes x 4 GPUs with 0, 1, 1 and 2 free; node 3 is free at 60, the rest at 600.
  // C (1x4) can start on node 3 at 60 and reserves it; D (1x2) fits only there now and
  // waits unless C is pending; as 2x1 it starts at once on nodes 1 and 2.
  struct Case {
    bool with_c;
    std::uint32_t d_nodes, d_per_node;
    Want d_starts;
  };
  const Case cases[] = {
      {true, 1, 2, {}},
      {false, 1, 2, {{3, 2}}},
      {true, 2, 1, {{1, 1}, {2, 1}}},
  };
  for (const auto& c : cases) {
    Options o = cluster(Policy::dl, 4, 4);
    o.shapes = Shapes::even_first;
    FakeHost host({4, 4, 4, 4});
    host.add_running({{0, 4}}, 600);
    host.add_running({{1, 3}}, 600);
    host.add_running({{2, 3}}, 600);
    host.add_running({{3, 2}}, 60);
    std::vector<std::uint32_t> order = {host.add_pending(4, 4, 100)};
    if (c.with_c) order.push_back(host.add_pending(1, 4, 60));
    const auto d = host.add_pending(c.d_nodes, c.d_per_node, 120);
    order.push_back(d);
    backfill_pass(host, o, order);
    std::vector<std::pair<std::uint32_t, Want>> want;
    if (!c.d_starts.empty()) want.emplace_back(d, c.d_starts);
    EXPECT_EQ(host.started, want) << c.with_c << " " << c.d_nodes << "x" << c.d_per_node;
  }
}

TEST(Backfill, OwnPassStartsOnlyWhatEndsBeforeTheHeadsReservation) {
  // The dl policy with best-fit shapes, 1 node x 4 GPUs with 2 free until 1000: H (4
  // GPUs) is reserved from 1020 (a slot); C (2 GPUs, 5000 s) would delay it and waits;
  // D (2 GPUs, 60 s) starts.
  FakeHost host({4});
  host.add_running({{0, 2}}, 1000);
  const auto h = host.add_pending(1, 4, 100);
  const auto c = host.add_pending(1, 2, 5000);
  const auto d = host.add_pending(1, 2, 60);
  backfill_pass(host, cluster(Policy::dl, 1, 4), {h, c, d});
  const std::vector<std::pair<std::uint32_t, Want>> want = {{d, {{0, 2}}}};
  EXPECT_EQ(host.started, want);
}

}  // namespace
}  // namespace dl::sim
