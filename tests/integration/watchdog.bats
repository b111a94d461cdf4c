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
teardown() { cancel_all; }

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
  ! grep -q "^=== rank 0 " "$report"
  [ "$(job_field "$job" Restarts)" = 1 ]
  grep -q "start rank=1 world=2 restart=1" out.txt
  grep -q "done rank=1 step=$steps" out.txt
}

@test "a hung rank of the C++ trainer: the report names it, its node and its native stacks; the job requeues and finishes" {
  job=$(submit -N2 --requeue --dl-watchdog=4s -o out.txt --open-mode=append --wrap \
    "srun --mpi=pmix $DLRUN $TRAINER --steps 12 --step-ms 50 --hang-rank 1 --hang-at-step 6")
  check_hang "$job" 12 ' dlrun_trainer_hang_here () at .*dlrun_trainer.cc:'
}

@test "a hung rank of the Python trainer started by a shell: the report holds its Python frames" {
  job=$(submit -N2 --requeue --dl-watchdog=4s -o out.txt --open-mode=append --wrap \
    "srun --mpi=pmix $DLRUN sh -c '/usr/bin/python3 $DL_ROOT/tests/integration/dlrun_trainer.py \
      --steps 12 --step-ms 50 --hang-rank 1 --hang-at-step 6; exit \$?'")
  check_hang "$job" 11 'dlrun_trainer.py", line [0-9]*, in hang_here'
}

@test "a checkpoint that takes longer than the watchdog's duration is no hang" {
  job=$(submit -N2 --requeue --dl-watchdog=2s -o out.txt --wrap \
    "srun --mpi=pmix $DLRUN $TRAINER --steps 40 --step-ms 50 --ckpt-ms 5000")
  wait_until 60 '[ "$(grep -c "start rank=" out.txt)" -eq 2 ]'
  sleep 0.5
  scancel --signal=USR1 "$job"
  wait_state "$job" COMPLETED 60
  [ "$(grep -c ' checkpoint rank=' out.txt)" -eq 2 ]
  ! grep -q "hang" out.txt
  [ "$(job_field "$job" Restarts)" = 0 ]
}

@test "a hung rank is declared hung during a checkpoint round too (it never reaches the round's step)" {
  job=$(submit -N2 --requeue --dl-watchdog=4s --dl-grace=10m -o out.txt --open-mode=append \
    --wrap "srun --mpi=pmix $DLRUN $TRAINER --steps 12 --step-ms 50 --hang-rank 1 --hang-at-step 6")
  wait_until 60 'grep -q "start rank=1 world=2 restart=0" out.txt'
  sleep 1
  scancel --signal=USR1 "$job"
  check_hang "$job" 12 ' dlrun_trainer_hang_here () at .*dlrun_trainer.cc:'
}

@test "programs without the client API are not watched; collective timeouts default beyond the watchdog" {
  run_srun -N1 --dl-watchdog=1s --mpi=pmix --export=ALL,TORCH_NCCL_ASYNC_ERROR_HANDLING=3 \
    $DLRUN sh -c 'sleep 4; echo "timeout=$DL_COLLECTIVE_TIMEOUT heartbeat=$TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC torch=$TORCH_NCCL_ASYNC_ERROR_HANDLING nccl=$NCCL_ASYNC_ERROR_HANDLING"' \
    >out.txt 2>&1
  grep -q "timeout=302 heartbeat=302 torch=3 nccl=1" out.txt
  ! grep -q "hang" out.txt
}

@test "under the job-level launcher (dlrun in the batch script) a hung rank is restarted inside the allocation" {
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
