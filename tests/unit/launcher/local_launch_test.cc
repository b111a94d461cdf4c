// dlrun's local launch inside a one-task step (srun --pty bash): when it applies, how
// many ranks, their layout and environment, and the launcher's exit code.
#include "launcher/local_launch.h"

#include <gtest/gtest.h>

namespace dl {
namespace {

// A shell in `srun --pty --dl-gpus=2 bash`: one task (the shell, pid 100), two GPUs.
StepView pty_shell() {
  StepView v;
  v.in_step = true;
  v.step_tasks = 1;
  v.task_pid = 100;
  v.self_pid = 4242;
  v.visible_gpus = "0,1";
  return v;
}

TEST(LocalLaunch, AOneTaskStepShellGetsOneRankPerVisibleGpu) {
  const LaunchDecision d = decide_launch(pty_shell());
  EXPECT_EQ(d.mode, LaunchMode::local);
  EXPECT_EQ(d.ranks, 2u);
  EXPECT_EQ(d.why, "inside a one-task step: 2 local ranks, one per visible GPU (0,1)");

  StepView four = pty_shell();
  four.visible_gpus = "4,5,6,7";
  EXPECT_EQ(decide_launch(four).ranks, 4u);
}

TEST(LocalLaunch, WithoutGpusOneRank) {
  for (const char* value : {"", "NoDevFiles", ","}) {
    StepView v = pty_shell();
    v.visible_gpus = value;
    const LaunchDecision d = decide_launch(v);
    EXPECT_EQ(d.mode, LaunchMode::local) << value;
    EXPECT_EQ(d.ranks, 1u) << value;
  }
  StepView unset = pty_shell();
  unset.visible_gpus.reset();
  EXPECT_EQ(decide_launch(unset).ranks, 1u);
  EXPECT_EQ(decide_launch(unset).why, "inside a one-task step, no GPU visible: 1 local rank");
}

TEST(LocalLaunch, DlrunAsTheStepsTaskKeepsThePerTaskPath) {
  // srun -n1 --mpi=pmix dlrun prog: slurmstepd exec'd dlrun as the task.
  StepView v = pty_shell();
  v.task_pid = v.self_pid;
  const LaunchDecision d = decide_launch(v);
  EXPECT_EQ(d.mode, LaunchMode::per_task);
  EXPECT_EQ(d.why, "dlrun is the step's task");
}

TEST(LocalLaunch, ASeveralTaskStepKeepsThePerTaskPath) {
  StepView v = pty_shell();
  v.step_tasks = 4;
  EXPECT_EQ(decide_launch(v).mode, LaunchMode::per_task);
  EXPECT_EQ(decide_launch(v).why, "the step has 4 tasks: each task is a rank");
  v.step_tasks.reset();
  EXPECT_EQ(decide_launch(v).mode, LaunchMode::per_task);
}

TEST(LocalLaunch, OutsideAStepKeepsThePerTaskPath) {
  // A batch script or an salloc shell: no step (the job-level launcher's case).
  StepView v = pty_shell();
  v.in_step = false;
  EXPECT_EQ(decide_launch(v).mode, LaunchMode::per_task);
  EXPECT_EQ(decide_launch(v).why, "not inside a step");
}

TEST(LocalLaunch, AStepWithoutTaskPidIsTakenForAShell) {
  StepView v = pty_shell();
  v.task_pid.reset();
  EXPECT_EQ(decide_launch(v).mode, LaunchMode::local);
}

TEST(LocalLaunch, VisibleGpuList) {
  EXPECT_EQ(visible_gpu_list("0,1"), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(visible_gpu_list("GPU-a1b2,GPU-c3d4"),
            (std::vector<std::string>{"GPU-a1b2", "GPU-c3d4"}));
  EXPECT_EQ(visible_gpu_list("3"), (std::vector<std::string>{"3"}));
  EXPECT_TRUE(visible_gpu_list("").empty());
  EXPECT_TRUE(visible_gpu_list("NoDevFiles").empty());
  EXPECT_EQ(visible_gpu_list("0,,1,"), (std::vector<std::string>{"0", "1"}));
}

TEST(LocalLaunch, LayoutIsOneNodeWithLocalRankEqualToRank) {
  const RankLayout l = local_layout(1, 2);
  EXPECT_EQ(l.rank, 1u);
  EXPECT_EQ(l.world_size, 2u);
  EXPECT_EQ(l.local_rank, 1u);
  EXPECT_EQ(l.local_world_size, 2u);
  EXPECT_EQ(l.node_rank, 0u);
}

TEST(LocalLaunch, RankEnvDropsTheStepsPmixAndKeepsGpus) {
  const std::vector<std::string> base = {"PATH=/usr/bin",
                                         "PMIX_RANK=0",
                                         "PMIX_NAMESPACE=slurm.pmix.5.0",
                                         "CUDA_VISIBLE_DEVICES=0,1",
                                         "PMIX_SERVER_URI41=pmix-server.1;tcp4://127.0.0.1:1",
                                         "SLURM_PROCID=0"};
  const EnvChanges c = local_rank_env(base, false);
  EXPECT_EQ(c.unset,
            (std::vector<std::string>{"PMIX_RANK", "PMIX_NAMESPACE", "PMIX_SERVER_URI41"}));
  EXPECT_TRUE(c.set.empty());
  EXPECT_TRUE(c.defaults.empty());
  const auto env = apply_env(base, c);
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/usr/bin", "CUDA_VISIBLE_DEVICES=0,1",
                                           "SLURM_PROCID=0"}));
}

TEST(LocalLaunch, OnATerminalPythonIsUnbufferedUnlessTheUserSaidOtherwise) {
  const std::vector<std::string> base = {"PATH=/usr/bin"};
  EXPECT_EQ(apply_env(base, local_rank_env(base, true)),
            (std::vector<std::string>{"PATH=/usr/bin", "PYTHONUNBUFFERED=1"}));
  const std::vector<std::string> own = {"PYTHONUNBUFFERED=0"};
  EXPECT_EQ(apply_env(own, local_rank_env(own, true)),
            (std::vector<std::string>{"PYTHONUNBUFFERED=0"}));
}

TEST(LocalLaunch, TheLaunchersExitCodeIsRankZerosUnlessOnlyAnotherFailed) {
  EXPECT_EQ(local_exit_code({0, 0}), 0);
  EXPECT_EQ(local_exit_code({143, 143}), 143);
  EXPECT_EQ(local_exit_code({75, 137}), 75);
  EXPECT_EQ(local_exit_code({0, 0, 3, 1}), 3);
  EXPECT_EQ(local_exit_code({}), 0);
}

}  // namespace
}  // namespace dl
