#!/usr/bin/env bats
# The mini-cluster is real Slurm: multi-node steps, PMIx, fake GPUs, batch jobs,
# preemption, and the SPANK plugin loaded.

load helpers

setup() { cd "$BATS_TEST_TMPDIR"; }
teardown() { cancel_all; }

# bats test_tags=stacks
@test "srun -N4 runs one task on each of four nodes" {
  run run_srun -N4 sh -c 'echo $SLURMD_NODENAME'
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | sort -u | tr '\n' ' ')" = "n1 n2 n3 n4 " ]
}

# bats test_tags=stacks
@test "PMIx put/commit/fence/get across 8 ranks on 4 nodes" {
  run run_srun -N4 --ntasks-per-node=2 --mpi=pmix "$DL_BUILD_DIR/tests/integration/pmix_exchange"
  [ "$status" -eq 0 ]
  # srun's own lines (a step that waited for nodes still completing the previous test's
  # jobs says so) are not the program's.
  output=$(echo "$output" | grep '^rank=')
  [ "$(echo "$output" | grep -c '^rank=')" -eq 8 ]
  # Every rank saw the same, complete table, with two ranks on each node.
  [ "$(echo "$output" | sed 's/.*peers=//' | sort -u | wc -l)" -eq 1 ]
  peers=$(echo "$output" | head -n 1 | sed 's/.*peers=//')
  [ "$peers" = "0@n1,1@n1,2@n2,3@n2,4@n3,5@n3,6@n4,7@n4" ]
  [ "$(echo "$output" | grep -o 'rank=[0-9]*' | sort -u | wc -l)" -eq 8 ]
  [ "$(echo "$output" | grep -c 'size=8 local_rank=[01] local_size=2')" -eq 8 ]
}

# bats test_tags=stacks
@test "fake GPUs are visible as CUDA_VISIBLE_DEVICES" {
  run run_srun -N4 --gpus-per-node=2 sh -c 'echo "$SLURMD_NODENAME=$CUDA_VISIBLE_DEVICES"'
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | sort | tr '\n' ' ')" = "n1=0,1 n2=0,1 n3=0,1 n4=0,1 " ]
  run run_srun -N1 --gpus=1 sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
  [ "$status" -eq 0 ]
  [ "$output" = "0" ]
}

# bats test_tags=stacks
@test "the SPANK plugin is loaded in every task of a DL job" {
  grep -q 'spank_dl.so' "$(dirname "$SLURM_CONF")/plugstack.conf"
  run run_srun -N4 --dl-experiment=foundation sh -c 'echo "${DL_SPANK_VERSION:-missing}"'
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | sort -u)" = "$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$DL_BUILD_DIR/config.h")" ]
}

@test "a two-node batch job runs and completes" {
  job=$(submit -N2 -o out.txt --wrap 'srun sh -c "echo hello from \$SLURMD_NODENAME"')
  wait_state "$job" COMPLETED 60
  [ "$(sort out.txt | tr '\n' ' ')" = "hello from n1 hello from n2 " ]
}

# preemption: SIGTERM at once, requeue (not cancel) when the grace time ends
# bats test_tags=stacks
@test "preemption: SIGTERM, requeue after the grace time" {
  # A short grace for this test only; the job ignores SIGTERM so that it outlives it.
  scontrol update PartitionName=low GraceTime=3
  low=$(submit -p low --requeue -N4 --gpus-per-node=2 -o low.txt \
    --wrap 'trap "echo got SIGTERM" TERM; while :; do sleep 0.2; done')
  wait_state "$low" RUNNING 30
  high=$(submit -p high -N1 --gpus-per-node=2 -o high.txt --wrap 'echo high ran')
  wait_state "$high" COMPLETED 90
  scontrol update PartitionName=low GraceTime=60
  grep -q 'got SIGTERM' low.txt
  [ "$(job_field "$low" Restarts)" -ge 1 ]
  wait_state "$low" 'PENDING|RUNNING|CONFIGURING' 30
}

# minicluster: up twice (with more SchedulerParameters), status, env and down on a second cluster
@test "minicluster: up twice, status, env, down" {
  mc="$DL_ROOT/scripts/minicluster"
  dir="$DL_BUILD_DIR/test-clusters/mc2" # munged must reach it
  port=$((${DL_MINICLUSTER_PORT_BASE:-16800} + 1100))
  run "$mc" up --dir "$dir" --port-base "$port" --sched-params 'a b'
  [ "$status" -ne 0 ]
  [ "$output" = "minicluster: --sched-params=a b: expected key[=value][,key[=value]...] (slurm.conf(5), SchedulerParameters)" ]
  # Ports among the kernel's ephemeral ones: a warning (then nothing started here, as the
  # --installed directory does not exist).
  read -r lo _ </proc/sys/net/ipv4/ip_local_port_range
  run "$mc" up --dir "$dir" --port-base "$lo" --installed /nonexistent
  [ "$status" -ne 0 ]
  [[ "$output" == *"minicluster: warning: --port-base=$lo: ports $lo-$((lo + 1099)) overlap the kernel's ephemeral ports"* ]]
  [[ "$output" == *"--installed /nonexistent: no such directory"* ]]
  "$mc" up --dir "$dir" --port-base "$port" --nodes 2 --gpus-per-node 1 --sched-params batch_sched_delay=0
  "$mc" up --dir "$dir" --port-base "$port" --nodes 2 --gpus-per-node 1 --sched-params batch_sched_delay=0
  SLURM_CONF="$dir/slurm.conf" run scontrol show config
  [[ "$output" == *"SchedulerParameters     = bf_interval=2,bf_continue,preempt_strict_order,batch_sched_delay=0"* ]]
  run "$mc" status --dir "$dir"
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | grep -c ': running')" -eq 4 ] # munged, slurmctld, 2 slurmd
  run "$mc" env --dir "$dir"
  [ "$output" = "export SLURM_CONF=$dir/slurm.conf" ]
  SLURM_CONF="$dir/slurm.conf" run timeout 60 srun -N2 true
  [ "$status" -eq 0 ]
  pids=$(cat "$dir"/run/*.pid)
  "$mc" down --dir "$dir"
  for p in $pids; do ! kill -0 "$p" 2>/dev/null; done
  # The main cluster is untouched.
  run_srun -N1 true
}

# minicluster --netns gives every node its own hostname and address
@test "minicluster --netns: a hostname and address each" {
  mc="$DL_ROOT/scripts/minicluster"
  dir="$DL_BUILD_DIR/test-clusters/mc3"
  port=$((${DL_MINICLUSTER_PORT_BASE:-16800} + 2100))
  "$mc" up --dir "$dir" --port-base "$port" --nodes 2 --netns
  SLURM_CONF="$dir/slurm.conf" run timeout 60 srun -N2 sh -c 'echo "$(hostname) $(hostname -I)"'
  "$mc" down --dir "$dir"
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | awk '{print $1}' | sort | tr '\n' ' ')" = "n1 n2 " ]
  [ "$(echo "$output" | awk '{print $2}' | sort -u | wc -l)" -eq 2 ]
  ! ip netns list | grep -q "dl$port-" || false
}

# minicluster restart-ctld kills a slurmctld still running 30 s after SIGTERM (as Slurm's
# bug 21875 leaves it) and starts it again
@test "minicluster restart-ctld: a slurmctld that does not stop is killed, then started" {
  p=$(ctld_pid)
  kill -STOP "$p" # SIGTERM stays pending
  run "$DL_ROOT/scripts/minicluster" restart-ctld
  [ "$status" -eq 0 ]
  [[ "$output" == *"minicluster: slurmctld (pid $p) still running 30 s after SIGTERM: killed (SIGKILL)"* ]]
  [ "$(ctld_pid)" != "$p" ]
  run_srun -N1 true
}

# The tests' helpers recover slurmctld only from the hang of Slurm's bug 21875: a thread
# waiting in slurmscriptd_flush, as gdb finds it in a stripped binary such as Debian's
@test "a slurmctld hung in slurmscriptd_flush is told from one stopped elsewhere" {
  cat >hang.c <<'C'
#include <pthread.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
__attribute__((noinline)) void slurmscriptd_flush(void) {
  pthread_mutex_lock(&m);
  for (;;) pthread_cond_wait(&c, &m);
}
int main(void) {
  slurmscriptd_flush();
  return 0;
}
C
  cc -O1 -rdynamic -pthread -o hang hang.c
  strip hang
  ./hang &
  hung=$!
  sleep 300 &
  other=$!
  sleep 0.5
  rc=0
  ctld_hung_in_flush "$hung" || rc=$?
  ctld_hung_in_flush "$other" || rc=$((rc + 10 * $?))
  kill -9 "$hung" "$other"
  [ "$rc" -eq 10 ]
}
