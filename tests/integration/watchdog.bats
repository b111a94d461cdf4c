#!/usr/bin/env bats
# The hang watchdog (--dl-watchdog): a rank that stops reporting steps while its peers
# wait is named, with its node and stacks, in a report in the job's directory, and the
# job recovers as from a failure.

load helpers

setup() {
  cd "$BATS_TEST_TMPDIR"
  DLRUN=$DL_BUILD_DIR/launcher/dlrun
  TRAINER=$DL_BUILD_DIR/tests/integration/dlrun_trainer
}
teardown() {
  cancel_all
  runuser -u dltest -- env SLURM_CONF="$SLURM_CONF" scancel --quiet -u dltest 2>/dev/null || true
  [ ! -f "$BATS_TEST_TMPDIR/plugstack.conf" ] || drain_off
  [ -z "${padded:-}" ] || "$DL_ROOT/scripts/minicluster" down --dir "$padded" >/dev/null 2>&1 || true
  rm -f /home/dltest/go
}

drain_dir() { echo "$(dirname "$SLURM_CONF")/drain-$$"; }

# spank_dl.so with drain_after=2 for this test (slurmstepd, srun and sbatch read
# plugstack.conf at each start); drain_off restores it and resumes what was drained.
drain_on() { plugstack_with "drain_after=2 drain_state_dir=$(drain_dir)"; }
drain_off() {
  plugstack_restore
  rm -rf "$(drain_dir)"
  local n
  for n in $(sinfo -h -N -o '%N %T' | awk '$2 ~ /drain/ {print $1}' | sort -u); do
    scontrol update NodeName="$n" State=RESUME 2>/dev/null || true
  done
}
# The nodes drained by slurm-dl, as "node reason" lines.
# (sinfo shows a node once per partition.)
drained() { sinfo -h -R -N -o '%N %E' | sort -u | grep ' slurm-dl: ' || true; }

# The report file named in out.txt, after the job has recovered and finished.
hang_report() { sed -n 's/.*dlrun: error: hang report: //p' out.txt | head -n 1; }

# Checks what every hang test checks: the verdict names rank 1, its node and its last
# step, the report holds every rank's last step, and the job was requeued once and ran
# to its end.
check_hang() {
  local job=$1 steps=$2 frame=$3
  wait_state "$job" COMPLETED 120
  node1=$(grep -o '\[rank 1@[^]]*\] start' out.txt | head -n 1 | sed 's/\[rank 1@\(.*\)\] start/\1/')
  node0=$(grep -o '\[rank 0@[^]]*\] start' out.txt | head -n 1 | sed 's/\[rank 0@\(.*\)\] start/\1/')
  [ -n "$node1" ] && [ -n "$node0" ]
  grep -q "\[rank 0@$node0\] dlrun: error: hang: no rank reported a step for 4s (--dl-watchdog); rank 1 on $node1 stalled first, at step 5" out.txt
  grep -q "rank 1 hung (no step for 4s, --dl-watchdog); report: .*: stopping all ranks" out.txt
  report=$(hang_report)
  [ -f "$report" ]
  [ "$(stat -c %a "$report")" = 600 ]
  grep -qx "0 $node0 6 [0-9.]*" "$report"
  grep -qx "1 $node1 5 [0-9.]*" "$report"
  grep -q "^=== rank 1 on $node1: collected with gdb ===" "$report"
  grep -q "$frame" "$report"
  # Only the stalled rank's stacks: rank 0 waited in its collective.
  ! grep -q "^=== rank 0 " "$report" || false
  [ "$(job_field "$job" Restarts)" = 1 ]
  grep -q "start rank=1 world=2 restart=1" out.txt
  grep -q "done rank=1 step=$steps" out.txt
}

# a hung rank of the C++ trainer: the report names it, its node and its native stacks; the job
# requeues and finishes
@test "a hung C++ rank: named with its stacks" {
  job=$(submit -N2 --requeue --dl-watchdog=4s -o out.txt --open-mode=append --wrap \
    "srun --mpi=pmix $DLRUN $TRAINER --steps 12 --step-ms 50 --hang-rank 1 --hang-at-step 6")
  check_hang "$job" 12 ' dlrun_trainer_hang_here () at .*dlrun_trainer.cc:'
}

# a hung rank of the Python trainer started by a shell: the report holds its Python frames
@test "a hung Python rank: its Python frames" {
  job=$(submit -N2 --requeue --dl-watchdog=4s -o out.txt --open-mode=append --wrap \
    "srun --mpi=pmix $DLRUN sh -c '/usr/bin/python3 $DL_ROOT/tests/integration/dlrun_trainer.py \
      --steps 12 --step-ms 50 --hang-rank 1 --hang-at-step 6; exit \$?'")
  check_hang "$job" 11 'dlrun_trainer.py", line [0-9]*, in hang_here'
}

# a checkpoint that takes longer than the watchdog's duration is no hang (twice as long;
# the watchdog leaves 3 s above the ranks' 1 s PROGRESS interval for a loaded machine:
# with 2 s it failed once in a CI rehearsal, never in 19 runs since, 14 under CPU hogs)
@test "a long checkpoint is no hang" {
  job=$(submit -N2 --requeue --dl-watchdog=4s -o out.txt --wrap \
    "srun --mpi=pmix $DLRUN $TRAINER --steps 40 --step-ms 50 --ckpt-ms 8000")
  wait_until 60 '[ "$(grep -c "start rank=" out.txt)" -eq 2 ]'
  sleep 0.5
  scancel --signal=USR1 "$job"
  wait_state "$job" COMPLETED 60
  [ "$(grep -c ' checkpoint rank=' out.txt)" -eq 2 ]
  ! grep -q "hang" out.txt || false
  [ "$(job_field "$job" Restarts)" = 0 ]
}

# a hung rank is declared hung during a checkpoint round too (it never reaches the round's step)
@test "a rank hung in a checkpoint round" {
  job=$(submit -N2 --requeue --dl-watchdog=4s --dl-grace=10m -o out.txt --open-mode=append \
    --wrap "srun --mpi=pmix $DLRUN $TRAINER --steps 12 --step-ms 50 --hang-rank 1 --hang-at-step 6")
  wait_until 60 'grep -q "start rank=1 world=2 restart=0" out.txt'
  sleep 1
  scancel --signal=USR1 "$job"
  check_hang "$job" 12 ' dlrun_trainer_hang_here () at .*dlrun_trainer.cc:'
}

# programs without the client API are not watched; collective timeouts default beyond the watchdog
@test "no client API, no watchdog" {
  run_srun -N1 --dl-watchdog=1s --mpi=pmix --export=ALL,TORCH_NCCL_ASYNC_ERROR_HANDLING=3 \
    $DLRUN sh -c 'sleep 4; echo "timeout=$DL_COLLECTIVE_TIMEOUT heartbeat=$TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC torch=$TORCH_NCCL_ASYNC_ERROR_HANDLING nccl=$NCCL_ASYNC_ERROR_HANDLING"' \
    >out.txt 2>&1
  grep -q "timeout=302 heartbeat=302 torch=3 nccl=1" out.txt
  ! grep -q "hang" out.txt || false
}

# under the job-level launcher (dlrun in the batch script) a hung rank is restarted inside the
# allocation
@test "a hung rank restarts in place (job launcher)" {
  job=$(submit -N2 --ntasks-per-node=1 --dl-watchdog=4s -o out.txt --wrap \
    "$DLRUN $TRAINER --steps 12 --step-ms 50 --hang-rank 1 --hang-at-step 6")
  wait_state "$job" COMPLETED 120
  grep -q "rank 1 hung (no step for 4s, --dl-watchdog); report: .*: stopping all ranks" out.txt
  [ -f "$(hang_report)" ]
  grep -q "^=== rank 1 on .*: collected with gdb ===" "$(hang_report)"
  grep -q 'restart 1 inside the allocation' out.txt
  [ "$(job_field "$job" Restarts)" = 0 ]
  grep -q "start rank=1 world=2 restart=1" out.txt
  grep -q "done rank=1 step=12" out.txt
}

# the node is drained after two hangs on it: the elastic job goes on without it; the reason names
# the job
@test "two hangs on a node drain it" {
  drain_on
  # --dl-elastic=2:4 on nodes of 2 GPUs: rank 2 runs on the job's second node.
  job=$(submit --dl-elastic=2:4 --dl-watchdog=3s -o out.txt --wrap \
    "$DLRUN $TRAINER --steps 12 --step-ms 50 --hang-rank 2 --hang-at-step 6 --fail-runs 2")
  wait_state "$job" COMPLETED 120
  node2=$(grep -o '\[rank 2@[^]]*\] start' out.txt | head -n 1 | sed 's/\[rank 2@\(.*\)\] start/\1/')
  [ -n "$node2" ]
  [ "$(grep -c "rank 2 hung (no step for 3s, --dl-watchdog); report: .*: stopping all ranks" out.txt)" = 2 ]
  grep -q "node $node2 caused the last two failures (rank 2 on $node2 hung; rank 2 on $node2 hung); excluded" out.txt
  grep -q "done rank=1 step=12" out.txt
  # The plugin drains when slurmstepd ends the step on the node, which may come after the
  # job has finished on the node left.
  wait_until 30 '[ -n "$(drained)" ]'
  [ "$(drained)" = "$node2 slurm-dl: job $job: steps 0,1 ended with this node as the culprit (dlrun exit 77)" ]
  [ "$(stat -c '%U %a' "$(drain_dir)")" = "root 700" ]
}

# drain_after (hostile, as dltest): failures on different nodes, forged records, ordinary jobs and
# every task failing drain at most one node of the job's own
@test "drain_after (hostile): at most one own node" {
  drain_on
  cd /home/dltest
  # The user forges what the plugin counts: DL_JOB_LAUNCHER=1 (steps of dlrun's job-level
  # launcher) and tasks exiting 77. Failures of that status on alternating nodes, and a
  # clean step between two on the same node: no node failed two steps of the job in a row.
  job=$(as_dltest sbatch --parsable -N2 --dl-gpus=2 -o /dev/null --wrap \
    "export DL_JOB_LAUNCHER=1; a=\$(scontrol show hostnames \$SLURM_JOB_NODELIST | head -n 1); \
     b=\$(scontrol show hostnames \$SLURM_JOB_NODELIST | tail -n 1); \
     srun -w \$a -N1 -n1 sh -c 'exit 77'; srun -w \$b -N1 -n1 sh -c 'exit 77'; \
     srun -w \$a -N1 -n1 sh -c 'exit 77'; srun -w \$a -N1 -n1 true; \
     srun -w \$a -N1 -n1 sh -c 'exit 77'; while [ ! -e go ]; do sleep 0.2; done")
  wait_state "$job" RUNNING 60
  first=$(scontrol show hostnames "$(job_field "$job" NodeList)" | head -n 1)
  # (slurmstepd records a step when it ends there, which may come after srun returned.)
  wait_until 60 "[ \"\$(cat '$(drain_dir)/$first.$job' 2>/dev/null)\" = 'culprit_steps=4 drained=0' ]"
  [ -z "$(drained)" ]
  # The records are root's: the user can neither read nor plant one.
  ! as_dltest cat "$(drain_dir)/$first.$job" || false
  ! as_dltest sh -c "echo 'culprit_steps=0 drained=0' >'$(drain_dir)/$first.999'" || false
  as_dltest touch go
  wait_state "$job" 'COMPLETED|FAILED' 60
  [ -z "$(drained)" ]
  # An ordinary job (no --dl-* option) is never recorded.
  plain=$(as_dltest sbatch --parsable -N1 -o /dev/null --wrap \
    "export DL_JOB_LAUNCHER=1; srun sh -c 'exit 77'; srun sh -c 'exit 77'; srun sh -c 'exit 77'")
  wait_state "$plain" 'COMPLETED|FAILED' 60
  [ -z "$(drained)" ]
  ! ls "$(drain_dir)" | grep -q "\.$plain\$" || false
  # Every task of every step exits with the culprit's status on both nodes: one node of
  # the job's own allocation is drained, once.
  all=$(as_dltest sbatch --parsable -N2 --dl-gpus=2 -o /dev/null --wrap \
    "export DL_JOB_LAUNCHER=1; for i in 1 2 3 4; do srun sh -c 'exit 77'; done")
  wait_state "$all" 'COMPLETED|FAILED' 60
  # The second node checks a second after the first (and the job may be over by then).
  wait_until 30 '[ -n "$(drained)" ]'
  sleep 2
  [ "$(drained | wc -l)" = 1 ]
  drained | grep -q " slurm-dl: job $all: steps 0,1 ended with this node as the culprit (dlrun exit 77)\$"
  scontrol show hostnames "$(job_field "$all" NodeList)" | grep -qx "$(drained | cut -d' ' -f1)"
}

# drain_after: a job's records on each of its nodes are removed when the job ends
@test "drain_after: records removed at the job's end" {
  drain_on
  cd /home/dltest
  job=$(as_dltest sbatch --parsable -N2 --dl-gpus=2 -o /dev/null --wrap \
    "export DL_JOB_LAUNCHER=1; srun -N2 -n2 sh -c 'exit 77'; while [ ! -e go ]; do sleep 0.2; done")
  records() { ls "$(drain_dir)" 2>/dev/null | grep -c "\.$job\$" || true; }
  wait_until 60 '[ "$(records)" = 2 ]'
  as_dltest touch go
  wait_state "$job" COMPLETED 60
  # slurmd runs the epilog before the job is COMPLETED.
  [ "$(records)" = 0 ]
  [ -z "$(drained)" ]
}

# drain_after on a cluster of 1,500 more nodes: a job whose every task fails drains one node
@test "drain_after with 1,500 more nodes: one drained" {
  # A second cluster, whose node list (scontrol -o show nodes) is over 1 MiB, its own
  # nodes last (Slurm 24.11 writes about 830 bytes per node: 1,200 were not enough).
  padded="$DL_BUILD_DIR/test-clusters/padded" # munged must reach it
  rm -rf "$padded/drain"
  "$DL_ROOT/scripts/minicluster" up --dir "$padded" --port-base $((${DL_MINICLUSTER_PORT_BASE:-16800} + 1100)) \
    --nodes 2 --padding-nodes 1500 --spank-args "drain_after=2 drain_state_dir=$padded/drain" >/dev/null
  export SLURM_CONF=$padded/slurm.conf
  [ "$(scontrol -o show nodes | wc -c)" -gt $((1 << 20)) ]
  cd /home/dltest
  job=$(as_dltest sbatch --parsable -N2 --dl-gpus=2 -o /dev/null --wrap \
    "export DL_JOB_LAUNCHER=1; for i in 1 2 3 4; do srun -N2 -n2 sh -c 'exit 77'; done")
  wait_state "$job" 'COMPLETED|FAILED' 60
  wait_until 30 '[ -n "$(drained)" ]'
  # The second node checks a second after the first.
  sleep 3
  [ "$(drained | wc -l)" = 1 ]
  drained | grep -q "^n[12] slurm-dl: job $job: steps 0,1 ended with this node as the culprit (dlrun exit 77)\$"
  grep -q "not draining n[12] for job $job: node n[12] was drained for job $job already" "$padded"/log/slurmd*.log
}
