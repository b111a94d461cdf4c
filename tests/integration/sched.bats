#!/usr/bin/env bats
# The controller plugins on the mini-cluster (4 nodes x 2 GPUs, partitions low and
# high): job_submit/dl shapes gangs and rejects what can never run, preempt/dl picks
# the preemptible DL job that loses the least work and Slurm requeues it,
# site_factor/dl ranks jobs by attained GPU service.

load helpers

setup() {
  cd "$BATS_TEST_TMPDIR"
  wait_queue_empty
}
teardown() {
  # A test that stopped slurmctld and failed before starting it again, or slurmctld hung.
  if ! scontrol ping 2>/dev/null | grep -q 'is UP'; then
    if kill -0 "$(ctld_pid)" 2>/dev/null; then
      recover_ctld
    else
      slurmctld -f "$SLURM_CONF"
      wait_until 30 'scontrol ping | grep -q "is UP"'
    fi
  fi
  cancel_all
  scancel --quiet -u dltest 2>/dev/null || true # the hostile tests' jobs
  scancel --quiet -u dlother 2>/dev/null || true
  # The cancelled jobs' epilogs read slurm.conf and plugstack.conf: the files are put
  # back once they are done, and whole (a rename), never half-written under a reader
  # (a failed epilog drains its node).
  wait_queue_empty
  if [ -f "$BATS_TEST_TMPDIR/slurm.conf.saved" ]; then
    cp "$BATS_TEST_TMPDIR/slurm.conf.saved" "$SLURM_CONF.new"
    mv "$SLURM_CONF.new" "$SLURM_CONF"
    if [ -f "$BATS_TEST_TMPDIR/restart-ctld" ]; then
      "$DL_ROOT/scripts/minicluster" restart-ctld # PreemptType needs a restart
    else
      reconfigure
    fi
  fi
  if [ -f "$BATS_TEST_TMPDIR/plugstack.conf.saved" ]; then
    cp "$BATS_TEST_TMPDIR/plugstack.conf.saved" "$(dirname "$SLURM_CONF")/plugstack.conf.new"
    mv "$(dirname "$SLURM_CONF")/plugstack.conf.new" "$(dirname "$SLURM_CONF")/plugstack.conf"
    reconfigure
  fi
  scontrol update PartitionName=low GraceTime=60
}

# Changes PrioritySiteFactorParameters for one test (teardown restores them).
site_params() {
  cp "$SLURM_CONF" "$BATS_TEST_TMPDIR/slurm.conf.saved"
  sed -i "s/^PrioritySiteFactorParameters=.*/PrioritySiteFactorParameters=$1/" "$SLURM_CONF"
  reconfigure
}

# Cancelled jobs of the previous test may still be completing.
wait_queue_empty() {
  local deadline=$((SECONDS + 60))
  while [ -n "$(squeue -h -o %i)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
}

count_state() { squeue -h -t "$1" -o %i | wc -l; }
comment_of() { scontrol show job "$1" | sed -n 's/^ *Comment=\(.*[^ ]\) *$/\1/p'; }

# A job step that outlives the signals of preemption (the launcher's part, not
# tested here) and prints each run.
forever='echo "run ${SLURM_RESTART_COUNT:-0}"; srun sh -c "trap \"\" TERM USR2; while :; do sleep 0.2; done"'

# gangs of 4 one-GPU learners on 8 GPUs: exactly 2 run, 2 wait, then all 4 complete
@test "gangs of 4 on 8 GPUs: 2 run, 2 wait, all end" {
  jobs=()
  for i in 1 2 3 4; do
    jobs+=("$(submit --dl-gpus=4 -n4 -o "out$i.txt" --wrap 'srun sh -c "echo \$SLURMD_NODENAME \$CUDA_VISIBLE_DEVICES"; sleep 8')")
  done
  deadline=$((SECONDS + 60))
  until [ "$(count_state RUNNING)" -eq 2 ] || [ $SECONDS -ge $deadline ]; do sleep 0.5; done
  for _ in 1 2 3 4 5; do
    [ "$(count_state RUNNING)" -eq 2 ]
    [ "$(count_state PENDING)" -eq 2 ]
    sleep 0.5
  done
  # Each running gang holds two whole nodes of 2 GPUs, never part of its learners.
  for job in $(squeue -h -t RUNNING -o %i); do
    [ "$(job_field "$job" NumNodes)" = 2 ]
    [ "$(job_field "$job" TresPerNode)" = $GPU_TRES:2 ]
  done
  for job in "${jobs[@]}"; do wait_state "$job" COMPLETED 120; done
  for i in 1 2 3 4; do
    [ "$(wc -l <"out$i.txt")" -eq 4 ]
    [ "$(awk '{print $2}' "out$i.txt" | sort -u)" = "0,1" ]
  done
}

# shapes in scontrol show job: pack, spread, switch, even, elastic, preemptible
# bats test_tags=stacks
@test "shapes in scontrol show job" {
  shape() {
    local job
    job=$(submit --hold "$@" -o /dev/null --wrap true)
    echo "$(job_field "$job" NumNodes) $(job_field "$job" TresPerNode)" \
      "$(job_field "$job" OverSubscribe) $(comment_of "$job")"
  }
  [ "$(shape --dl-gpus=2)" = "1-1 $GPU_TRES:2 OK dl: 2 GPUs as 1x2" ]
  [ "$(shape --dl-gpus=4)" = "2-2 $GPU_TRES:2 NO dl: 4 GPUs as 2x2" ]
  [ "$(shape --dl-gpus=3)" = "2-2 $GPU_TRES:2 NO dl: 3 GPUs as 2x2" ]
  [ "$(shape --dl-gpus=4 --dl-placement=spread)" = "4-4 $GPU_TRES:1 OK dl: 4 GPUs as 4x1 spread" ]
  [ "$(shape --dl-gpus=6 --dl-placement=spread)" = "3-3 $GPU_TRES:2 OK dl: 6 GPUs as 3x2 spread" ]
  [ "$(shape --dl-gpus=4 --dl-placement=switch)" = "2-2 $GPU_TRES:2 NO dl: 4 GPUs as 2x2 on one switch" ]
  # even: split evenly over shared nodes, never whole exclusive nodes, never ragged.
  [ "$(shape --dl-gpus=3 --dl-placement=even)" = "3-3 $GPU_TRES:1 OK dl: 3 GPUs as 3x1 even" ]
  [ "$(shape --dl-gpus=2 --dl-placement=even)" = "1-1 $GPU_TRES:2 OK dl: 2 GPUs as 1x2 even" ]
  [ "$(shape --dl-elastic=2:8)" = "1-4 $GPU_TRES:2 NO dl: 2-8 GPUs as 1-4x2, elastic" ]
  [ "$(shape --dl-gpus=4 -N4)" = "4-4 $GPU_TRES:1 OK dl: 4 GPUs as 4x1" ]
  job=$(submit --hold --dl-gpus=4 --dl-placement=switch -o /dev/null --wrap true)
  scontrol show job "$job" | grep -q 'Switches=1@'
  job=$(submit --hold --dl-gpus=2 --dl-preemptible --dl-grace=20s -o /dev/null --wrap true)
  [ "$(comment_of "$job")" = "dl: 2 GPUs as 1x2, preemptible" ]
  [ "$(job_field "$job" Requeue)" = 1 ]
  # 4 x (20 s grace + 30 s) = 200 s, in whole minutes.
  [ "$(job_field "$job" TimeMin)" = 00:04:00 ]
}

# the shapes run: pack on two whole nodes, spread one GPU per node, elastic on what is free
@test "the shapes run as placed" {
  run run_srun --dl-gpus=4 sh -c 'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"'
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | awk '{print $1}' | sort -u | wc -l)" -eq 2 ]
  [ "$(echo "$output" | awk '{print $2}' | sort -u)" = "0,1" ]
  run run_srun --dl-gpus=4 --dl-placement=spread sh -c 'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"'
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | awk '{print $1}' | sort | tr '\n' ' ')" = "n1 n2 n3 n4 " ]
  [ "$(echo "$output" | awk '{print $2}' | sort -u)" = "0" ]
  # Two nodes busy: the elastic gang starts on the two that are free.
  busy=$(submit --dl-gpus=4 -o /dev/null --wrap 'sleep 60')
  wait_state "$busy" RUNNING 30
  run run_srun --dl-elastic=2:8 sh -c 'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"'
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | wc -l)" -eq 2 ]
  [ "$(echo "$output" | awk '{print $2}' | sort -u)" = "0,1" ]
}

# sbatch --dl-gpus=N runs one rank per GPU under dlrun, LOCAL_RANK matching; an explicit layout
# stands
@test "--dl-gpus=N: one rank per GPU under dlrun" {
  # Each job prints "node RANK LOCAL_RANK WORLD_SIZE CUDA_VISIBLE_DEVICES" per rank.
  ranks='srun --mpi=pmix '"$DL_BUILD_DIR"'/launcher/dlrun --no-prefix sh -c "echo \$SLURMD_NODENAME \$RANK \$LOCAL_RANK \$WORLD_SIZE \$CUDA_VISIBLE_DEVICES" | sort -k2n'
  four=$(submit --dl-gpus=4 -o four.txt --wrap "$ranks")
  three=$(submit --dl-gpus=3 -o three.txt --wrap "$ranks")
  per_node=$(submit --dl-gpus=4 --ntasks-per-node=1 -o per_node.txt --wrap "$ranks")
  two=$(submit --dl-gpus=4 -n2 -o two.txt --wrap "$ranks")
  for job in "$four" "$three" "$per_node" "$two"; do wait_state "$job" COMPLETED 120; done
  # dlrun's own lines (on stderr, in the same file) aside.
  for f in four three per_node two; do grep -v 'dlrun:' $f.txt >$f.rows || true; done
  # 4 GPUs on 2-GPU nodes: 4 ranks, 2 per node, local ranks 0 and 1 seeing both GPUs.
  [ "$(awk '{print $2, $3, $4, $5}' four.rows | tr '\n' ';')" = "0 0 4 0,1;1 1 4 0,1;2 0 4 0,1;3 1 4 0,1;" ]
  [ "$(awk '{print $1}' four.rows | sort -u | wc -l)" -eq 2 ]
  [ "$(comment_of "$four" | sed 's/ | .*//')" = "dl: 4 GPUs as 2x2" ]
  # 3 GPUs: 3 ranks (2 + 1), never one per GPU the job does not use.
  [ "$(awk '{print $2, $3, $4}' three.rows | tr '\n' ';')" = "0 0 3;1 1 3;2 0 3;" ]
  # The user's own layouts stand, on the shape's nodes, and the comment says so.
  [ "$(awk '{print $2, $3, $4}' per_node.rows | tr '\n' ';')" = "0 0 2;1 0 2;" ]
  [ "$(awk '{print $1}' per_node.rows | sort -u | wc -l)" -eq 2 ]
  [ "$(comment_of "$per_node" | sed 's/ | .*//')" = "dl: 4 GPUs as 2x2, 1 task per node" ]
  [ "$(awk '{print $2, $4}' two.rows | tr '\n' ';')" = "0 2;1 2;" ]
  [ "$(comment_of "$two" | sed 's/ | .*//')" = "dl: 4 GPUs as 2x2, 2 tasks" ]
}

# a shape that can never run is rejected at submit time with the largest that could
# bats test_tags=stacks
@test "an impossible shape is rejected at submit" {
  run sbatch --dl-gpus=10 --wrap true
  [ "$status" -ne 0 ]
  [ "${lines[0]}" = "sbatch: error: dl: --dl-gpus=10: a pack gang of 5x2 whole nodes can never run in partition low (4 nodes x 2 GPUs); the largest pack gang there is 8 GPUs (4x2)" ]
  run sbatch -p high --dl-gpus=6 --dl-placement=switch --wrap true
  [ "$status" -ne 0 ]
  [ "${lines[0]}" = "sbatch: error: dl: --dl-gpus=6: a switch gang of 3x2 whole nodes can never run in partition high (4 nodes x 2 GPUs), at most 2 such nodes under one leaf switch; the largest switch gang there is 4 GPUs (2x2)" ]
  run sbatch --dl-elastic=10:16 --wrap true
  [ "$status" -ne 0 ]
  [ "${lines[0]}" = "sbatch: error: dl: --dl-elastic=10:16: an elastic gang of 5-8x2 whole nodes can never run in partition low (4 nodes x 2 GPUs); the largest elastic gang there is 8 GPUs (4x2)" ]
  run timeout 30 srun --dl-gpus=9 --dl-placement=spread true
  [ "$status" -ne 0 ]
  echo "$output" | grep -qxF "srun: error: dl: --dl-gpus=9: a spread gang of 3x3 GPUs can never run in partition low (4 nodes x 2 GPUs); the largest spread gang there is 8 GPUs (4x2)"
  queue_empty
}

# a spec that contradicts the rest of the request is rejected at submit time
@test "a contradictory spec is rejected at submit" {
  run sbatch --dl-gpus=4 --gpus=2 --wrap true
  [ "$status" -ne 0 ]
  [ "${lines[0]}" = "sbatch: error: dl: --dl-gpus=4: contradicts the 2 GPUs asked with --gpus/--gres=gpu; give only --dl-gpus" ]
  run sbatch --dl-gpus=2 --dl-grace=5m -t 2 --wrap true
  [ "$status" -ne 0 ]
  [ "${lines[0]}" = "sbatch: error: dl: --dl-grace=5m: must be shorter than the time limit (2m)" ]
  run sbatch --dl-gpus=2 --comment=mine --wrap true
  [ "$status" -ne 0 ]
  [ "${lines[0]}" = "sbatch: error: dl: --comment: the comment of a slurm-dl job holds its shape and status; label it with --dl-experiment and --dl-trial instead" ]
  queue_empty
  # Consistent native GPU options are fine; the shape replaces them.
  job=$(submit --hold --dl-gpus=4 --gpus=4 -o /dev/null --wrap true)
  [ "$(job_field "$job" TresPerNode)" = $GPU_TRES:2 ]
}

# a time limit updated below a DL job's --dl-grace is refused; where Slurm can, it says why
# bats test_tags=stacks
@test "a time limit below --dl-grace is refused" {
  job=$(submit --hold --dl-gpus=2 --dl-grace=5m -t 30 -o /dev/null --wrap true)
  run scontrol update JobId="$job" TimeLimit=4
  [ "$status" -ne 0 ]
  [ "$(job_field "$job" TimeLimit)" = 00:30:00 ]
  # Since 23.02 the job_submit plugin's message reaches the user.
  if [ "${slurm_release%%.*}" -ge 23 ]; then
    [[ $output =~ "dl: --dl-grace=5m: must be shorter than the time limit (4m)" ]]
  fi
  scontrol update JobId="$job" TimeLimit=60
  [ "$(job_field "$job" TimeLimit)" = 01:00:00 ]
}

# a preemptible job is requeued, not killed, when a high-priority job needs its GPUs, and runs again
@test "a preemptible job is requeued, not killed" {
  scontrol update PartitionName=low GraceTime=3
  low=$(submit --dl-gpus=8 --dl-preemptible -o low.txt --wrap "$forever")
  wait_state "$low" RUNNING 30
  high=$(submit -p high --dl-gpus=4 -o high.txt --wrap 'echo high ran; sleep 5')
  wait_state "$high" 'RUNNING|COMPLETED' 90
  [ "$(job_field "$low" Restarts)" -ge 1 ]
  [ "$(job_state "$low")" != CANCELLED ]
  wait_state "$high" COMPLETED 60
  # Slurm holds a requeued job for the credential lifetime (30 s here), then it runs.
  wait_state "$low" RUNNING 120
  [ "$(cat high.txt)" = "high ran" ]
  deadline=$((SECONDS + 30))
  until grep -q '^run 1$' low.txt || [ $SECONDS -ge $deadline ]; do sleep 0.5; done
  grep -q '^run 1$' low.txt
}

# bats test_tags=stacks
@test "the victim is the preemptible job that loses the least work" {
  scontrol update PartitionName=low GraceTime=3
  older=$(submit --dl-gpus=4 --dl-preemptible -o /dev/null --wrap "$forever")
  wait_state "$older" RUNNING 30
  sleep 10
  newer=$(submit --dl-gpus=4 --dl-preemptible -o /dev/null --wrap "$forever")
  wait_state "$newer" RUNNING 30
  # Both hold 4 GPUs; the newer one has run for less time since its last checkpoint.
  high=$(submit -p high --dl-gpus=4 -o /dev/null --wrap 'sleep 5')
  wait_state "$high" RUNNING 90
  [ "$(job_field "$newer" Restarts)" -ge 1 ]
  [ "$(job_field "$older" Restarts)" -eq 0 ]
  [ "$(job_state "$older")" = RUNNING ]
}

# Issue 12, item 9: slurm-dl never makes a job harder to preempt. Between partitions a
# plain job and a DL job without --dl-preemptible (an experiment label only) are
# requeued exactly as preempt/partition_prio requeues plain jobs; --dl-preemptible only
# adds the checkpoint and the least-lost-work order.
# Preempts a job of kind $1 (plain, dl: --dl-experiment only) in low by a plain job in
# high, both on whole nodes; the low job is requeued (PreemptMode=REQUEUE).
preempted_by_high() {
  local opts=""
  [ "$1" = dl ] && opts="--dl-experiment=x"
  low=$(submit -N4 --exclusive $opts -o /dev/null --wrap "$forever")
  wait_state "$low" RUNNING 30
  high=$(submit -p high -N1 --exclusive -o /dev/null --wrap 'sleep 1')
  wait_state "$high" 'RUNNING|COMPLETED' 90
  [ "$(job_field "$low" Restarts)" -ge 1 ]
  [ "$(job_state "$low")" != CANCELLED ]
  cancel_all
  wait_queue_empty
}

# within a tier, a new job preempts a preemptible DL job that has had far more GPU service
@test "a new job preempts one with far more service" {
  # One level per doubling of GPU-seconds (instead of GPU-hours), so that a few
  # seconds on 8 GPUs are worth more than the margin (25000 points: five levels).
  site_params interval=2s,service_unit=1s,queues=none
  scontrol update PartitionName=low GraceTime=3
  long=$(submit --dl-gpus=8 --dl-preemptible -o /dev/null --wrap "$forever")
  wait_state "$long" RUNNING 30
  sleep 10
  new=$(submit --dl-gpus=2 -o /dev/null --wrap 'echo new ran')
  wait_state "$new" 'RUNNING|COMPLETED' 90
  [ "$(job_field "$long" Restarts)" -ge 1 ]
  [ "$(job_state "$long")" != CANCELLED ]
  grep -q "preempted JobId=$long has been requeued" "$(dirname "$SLURM_CONF")/log/slurmctld.log"
}

# sprio shows the site factor; a job that has used more GPU time ranks below a new one
# bats test_tags=stacks
@test "sprio: more GPU time ranks below a new job" {
  scontrol update PartitionName=low GraceTime=3
  used=$(submit --dl-gpus=8 --dl-preemptible -o /dev/null --wrap "$forever")
  wait_state "$used" RUNNING 30
  sleep 15
  # A high-priority job takes every GPU for a while; the used job is requeued.
  high=$(submit -p high --dl-gpus=8 -o /dev/null --wrap 'sleep 90')
  wait_state "$high" RUNNING 90
  fresh=$(submit --dl-gpus=2 -o /dev/null --wrap true)
  # Once Slurm's requeue hold is over both are eligible and sprio lists them.
  deadline=$((SECONDS + 90))
  until sprio -h -o %i | grep -qx " *$used" || [ $SECONDS -ge $deadline ]; do sleep 1; done
  sleep 3 # one refresh of the priorities (every 2 s here)
  sprio -l | head -n 1 | grep -q ' SITE '
  site() { sprio -h -o '%i %S' -j "$1" | awk '{print $2}'; }
  used_site=$(site "$used")
  fresh_site=$(site "$fresh")
  echo "site factors: used $used_site, fresh $fresh_site"
  [ "$used_site" -gt 90000 ]
  [ "$used_site" -lt "$fresh_site" ]
  [ "$(job_field "$used" Priority)" -lt "$(job_field "$fresh" Priority)" ]
}

# queues=pNN: the thresholds are percentiles of the service of the jobs that finished,
# so a requeued job that has had more than those ranks in the last queue
# bats test_tags=stacks
@test "queues=p1:p2: thresholds from the finished jobs" {
  log=$(sed -n 's/^SlurmctldLogFile=//p' "$SLURM_CONF")
  mark=$(wc -l <"$log")
  site_params interval=1s,queues=p1:p2
  # What reconfigure found: thresholds, or how many jobs have finished so far.
  wait_until 10 "tail -n +$((mark + 1)) '$log' | grep -q 'dl: site_factor: queue thresholds'"
  tail -n +"$((mark + 1))" "$log" |
    grep -Eq "dl: site_factor: queue thresholds (p1 [0-9.e+-]+, p2 [0-9.e+-]+ GPU-hours, from the last [0-9]+ finished jobs|not yet set: [0-9] of 10 jobs have finished)"
  # Enough small jobs finish (2 GPU-seconds each) to set the thresholds.
  small=$(submit --array=1-10 --gres=gpu:1 -o /dev/null --wrap 'sleep 2')
  wait_until 90 '[ -z "$(squeue -h -j "$small" -o %i)" ]'
  used=$(submit --gres=gpu:2 -o /dev/null --wrap 'sleep 300')
  wait_state "$used" RUNNING 30
  sleep 10 # 20 GPU-seconds
  # Every GPU taken once the used job is requeued, so that it and a new job wait.
  busy=$(submit -N4 --gres=gpu:2 -o /dev/null --wrap 'sleep 120')
  scontrol requeue "$used"
  wait_state "$busy" RUNNING 60
  fresh=$(submit --gres=gpu:2 -o /dev/null --wrap true)
  deadline=$((SECONDS + 90))
  until sprio -h -o %i | grep -qx " *$used" || [ $SECONDS -ge $deadline ]; do sleep 1; done
  sleep 3 # a few samples
  site() { sprio -h -o '%i %S' -j "$1" | awk '{print $2}'; }
  used_site=$(site "$used")
  fresh_site=$(site "$fresh")
  echo "site factors: used $used_site, fresh $fresh_site"
  # Three queues of 33,333 points: the used job is in the last, the new one in the first.
  [ "$used_site" -lt 33333 ]
  [ "$fresh_site" -ge 66666 ]
}

# site_factor/dl's default is queues=auto (p50:p95 of the finished jobs); the mini-cluster
# runs its tests with queues=none
# bats test_tags=stacks
@test "the default queues are at the finished jobs' p50 and p95" {
  log=$(sed -n 's/^SlurmctldLogFile=//p' "$SLURM_CONF")
  mark=$(wc -l <"$log")
  site_params interval=1s
  wait_until 10 "tail -n +$((mark + 1)) '$log' | grep -q 'dl: site_factor: queue thresholds'"
  tail -n +"$((mark + 1))" "$log" |
    grep -Eq "dl: site_factor: queue thresholds (p50 [0-9.e+-]+, p95 [0-9.e+-]+ GPU-hours, from the last [0-9]+ finished jobs|not yet set: [0-9] of 10 jobs have finished)"
}

# queues=pNN weighs each user's finished jobs as one user: a user who floods the cluster with
# tiny GPU jobs cannot drag the thresholds down to them (and so put everyone else's
# running jobs in the last queue, where that user's new jobs could preempt them)
# bats test_tags=stacks
@test "queues=p50:p95: a flood of tiny jobs moves no threshold" {
  state=$(sed -n 's/^StateSaveLocation=//p' "$SLURM_CONF")
  log=$(sed -n 's/^SlurmctldLogFile=//p' "$SLURM_CONF")
  # Only this test's jobs in the window: the earlier tests' finished jobs purged (every
  # 10 s with MinJobAge=10), then slurmctld started again without its ledger.
  site_params interval=1s,queues=p50:p95
  sed -i 's/^MinJobAge=.*/MinJobAge=10/' "$SLURM_CONF"
  reconfigure
  wait_until 60 '[ -z "$(squeue -h -t all -o %i)" ]'
  stop_ctld "$(ctld_pid)"
  rm -f "$state"/site_factor_dl.state*
  slurmctld -f "$SLURM_CONF"
  wait_until 30 'scontrol ping | grep -q "is UP"'
  # Two users' jobs of 6 GPU-seconds each, and a third user's 40 jobs of 1-2.
  root=$(submit --array=1-10 --gres=gpu:1 -o /dev/null --wrap 'sleep 6')
  other=$(as_dltest sbatch --parsable --array=1-10 --gres=gpu:1 -o /dev/null --chdir=/tmp \
    --wrap 'sleep 6')
  flood=$(as_dlother sbatch --parsable --array=1-40 --gres=gpu:1 -o /dev/null --chdir=/tmp \
    --wrap 'sleep 1')
  echo "jobs: $root $other $flood"
  wait_until 240 '[ -z "$(squeue -h -o %i)" ]'
  sleep 3 # the last samples
  mark=$(wc -l <"$log")
  reconfigure
  wait_until 10 "tail -n +$((mark + 1)) '$log' | grep -q 'dl: site_factor: queue thresholds p50'"
  line=$(tail -n +"$((mark + 1))" "$log" | grep -o 'dl: site_factor: queue thresholds p50.*' | tail -n 1)
  echo "$line"
  echo "$line" | grep -q 'from the last 60 finished jobs of 3 users'
  # Counted per job, the flood is two thirds of the window and the median is one of its
  # 1-2 GPU-seconds; as one user of three, the median is the other users' 6.
  p50=$(echo "$line" | sed -n 's/.*p50 \([0-9.e+-]*\),.*/\1/p')
  awk -v h="$p50" 'BEGIN { exit !(h * 3600 >= 4) }'
}

# cancelling a job and resubmitting it with --dl-resume-from does not buy its priority back
@test "cancel and resume does not buy priority back" {
  # A level step per GPU-minute: 20 s on 8 GPUs costs the job about 9,000 points.
  site_params interval=2s,service_unit=60s,queues=none
  used=$(as_dltest sbatch --parsable --dl-gpus=8 -o /dev/null --wrap 'sleep 300')
  wait_state "$used" RUNNING 30
  sleep 20
  # Another user's job takes every GPU once the used job is gone, so that the
  # resubmission and a new job both wait and are ranked.
  busy=$(submit --dl-gpus=8 -o /dev/null --wrap 'sleep 120')
  as_dltest scancel "$used"
  wait_state "$busy" RUNNING 60
  resumed=$(as_dltest sbatch --parsable --dl-gpus=8 --dl-resume-from="$used" -o /dev/null \
    --wrap true)
  fresh=$(as_dltest sbatch --parsable --dl-gpus=8 -o /dev/null --wrap true)
  sleep 6 # a few samples and refreshes of the priorities
  site() { sprio -h -o '%i %S' -j "$1" | awk '{print $2}'; }
  resumed_site=$(site "$resumed")
  fresh_site=$(site "$fresh")
  echo "site factors: resumed $resumed_site, fresh $fresh_site"
  # The resubmission keeps the service of the job it continues (about 9,000 points,
  # hardly decayed); a new job of the same user starts with the full las_weight.
  [ "$fresh_site" -gt 95000 ]
  [ "$resumed_site" -lt $((fresh_site - 5000)) ]
}

@test "a job's wait on a dependency earns it no age" {
  # 100 points of age a second: 20 seconds of waiting would be 2,000.
  site_params interval=2s,age_period=1000s,queues=none
  # busy holds three of the four nodes (whole: a gang's nodes are its own), first
  # the fourth; the 4-GPU jobs can only wait.
  busy=$(as_dltest sbatch --parsable --dl-gpus=6 -o /dev/null --wrap 'sleep 120')
  wait_state "$busy" RUNNING 30
  first=$(as_dltest sbatch --parsable -n1 -o /dev/null --wrap 'sleep 60')
  wait_state "$first" RUNNING 30
  dependent=$(as_dltest sbatch --parsable --dependency="afterany:$first" --dl-gpus=4 \
    -o /dev/null --wrap true)
  sleep 20
  # A job eligible from now on, with no age yet.
  fresh=$(as_dltest sbatch --parsable --dl-gpus=4 -o /dev/null --wrap true)
  sleep 5 # a few samples and refreshes of the priorities (every 2 s here)
  # sprio leaves out a job waiting on a dependency: the priorities, whose difference
  # is the site factors' (same partition, size and user; Slurm's own age counts
  # neither the dependency wait).
  dependent_priority=$(job_field "$dependent" Priority)
  fresh_priority=$(job_field "$fresh" Priority)
  echo "priorities: dependent $dependent_priority, fresh $fresh_priority"
  # Still waiting on first: Slurm counts it no age (AccrueTime), nor may the DL priority.
  [ "$(job_field "$dependent" Reason)" = Dependency ]
  [ "$dependent_priority" -le $((fresh_priority + 500)) ]
}

# Issue 12, item 8: the controller does not trust the job's SPANK environment. A client
# on libslurm sets DL_* itself, skipping the SPANK plugin's checks.
# a submission that skips the SPANK plugin is held to the site's limits by job_submit/dl
@test "skipping SPANK: job_submit/dl holds the limits" {
  plugstack=$(dirname "$SLURM_CONF")/plugstack.conf
  cp "$plugstack" "$BATS_TEST_TMPDIR/plugstack.conf.saved"
  sed -i '/spank_dl.so/ s/$/ max_gpus=4/' "$plugstack"
  reconfigure
  raw=$DL_BUILD_DIR/tests/integration/submit_raw
  log=$(dirname "$SLURM_CONF")/log/slurmctld.log
  # Within the site's limit: accepted and shaped as usual.
  run "$raw" DL_SPEC_VERSION=1 DL_GPUS=4
  [ "$status" -eq 0 ]
  ok=$output
  [ "$(comment_of "$ok")" != "" ]
  # Beyond it: rejected, naming the variable and the limit; nothing queued.
  run "$raw" DL_SPEC_VERSION=1 DL_GPUS=6
  [ "$status" -eq 1 ]
  grep -q "dl: job_submit: rejected a job of uid $(id -u): DL_GPUS.*4" "$log"
  run "$raw" DL_SPEC_VERSION=1 DL_GPUS=2 DL_GRACE=-5
  [ "$status" -eq 1 ]
  grep -q "rejected a job of uid $(id -u): DL_GRACE" "$log"
  # Work one submission can cause: a partition list repeated ten thousand times, and
  # a SPANK environment of thousands of entries, are refused at once.
  run timeout 30 "$raw" -p "$(printf 'low,%.0s' $(seq 10000))" DL_SPEC_VERSION=1 DL_GPUS=2
  [ "$status" -eq 1 ]
  grep -q "rejected a job of uid $(id -u): --partition: a list of 40000 characters" "$log"
  run timeout 30 "$raw" DL_SPEC_VERSION=1 DL_GPUS=2 $(seq -f 'X%g=1' 2000)
  [ "$status" -eq 1 ]
  grep -q "SPANK environment has 2002 entries" "$log"
  [ "$(squeue -h -o %i | grep -vc "^$ok$")" -eq 0 ]
}

# A client on libslurm spells the spec as job_submit/dl accepts it ("yes", "30m");
# preempt/dl must read it as job_submit/dl did, not with rules of its own.
# DL_PREEMPTIBLE=yes from a client that skips the SPANK plugin is preemptible to preempt/dl too
@test "skipping SPANK: DL_PREEMPTIBLE still counts" {
  site_params interval=2s,service_unit=1s,queues=none
  scontrol update PartitionName=low GraceTime=3
  raw=$DL_BUILD_DIR/tests/integration/submit_raw
  long=$("$raw" -w 'sleep 600' DL_SPEC_VERSION=1 DL_GPUS=8 DL_PREEMPTIBLE=yes DL_CKPT_EVERY=30m)
  wait_state "$long" RUNNING 30
  [[ $(comment_of "$long") == *preemptible* ]]
  sleep 10
  new=$(submit --dl-gpus=2 -o /dev/null --wrap 'echo new ran')
  wait_state "$new" 'RUNNING|COMPLETED' 90
  [ "$(job_field "$long" Restarts)" -ge 1 ]
  grep -q "preempted JobId=$long has been requeued" "$(dirname "$SLURM_CONF")/log/slurmctld.log"
  # The controller holds the spec as job_submit/dl read it, in the one form.
  spec=$(dirname "$SLURM_CONF")/log/prolog-spec.log
  grep -qx "$long SPANK_DL_PREEMPTIBLE=1" "$spec"
  grep -qx "$long SPANK_DL_CKPT_EVERY=1800" "$spec"
}

# Issue 12, item 10: site_factor/dl's sampler thread is stopped and joined in fini. A
# joinable std::thread destroyed at exit aborts slurmctld (std::terminate), a thread left
# running while slurmctld unloads the plugin crashes it, a leaked slurmctld lock hangs
# its shutdown. slurmctld runs in the foreground here so that its exit status is seen.
# slurmctld stopped with SIGTERM while site_factor/dl samples every second exits 0, and comes back
@test "slurmctld SIGTERM mid-sampling: exits 0, back" {
  site_params interval=1s
  state=$(sed -n 's/^StateSaveLocation=//p' "$SLURM_CONF")
  log=$(sed -n 's/^SlurmctldLogFile=//p' "$SLURM_CONF")
  running=$(submit -o /dev/null --dl-gpus=2 --wrap 'sleep 300')
  pending=$(submit -o /dev/null --dl-gpus=2 --begin=now+3600 --wrap true)
  wait_state "$running" RUNNING 30
  stop_ctld "$(ctld_pid)"
  for delay in 1.3 2.1 3.7; do
    slurmctld -D -f "$SLURM_CONF" >ctld.out 2>&1 &
    pid=$!
    wait_until 30 'scontrol ping | grep -q "is UP"'
    sleep "$delay" # a sample or more, then SIGTERM wherever the sampler is
    stop_ctld "$pid"
    rc=0
    wait "$pid" || rc=$?
    cat ctld.out
    [ "$rc" -eq 0 ]
    ! grep -qi 'terminate called\|abort\|segfault' ctld.out || false
    # The ledger was saved and restored, the jobs carry on.
    grep -q "dl: site_factor: service of [0-9]* jobs restored from $state/site_factor_dl.state" "$log"
  done
  ! grep -q 'dl: site_factor: sampling:' "$log" || false
  slurmctld -f "$SLURM_CONF"
  wait_until 30 'scontrol ping | grep -q "is UP"'
  "$DL_ROOT/scripts/minicluster" restart-ctld
  [ "$(job_state "$running")" = RUNNING ]
  [ "$(job_state "$pending")" = PENDING ]
}

# Issue 12, item 11: slurmctld killed (SIGKILL) while site_factor/dl saves its ledger
# every second (a running job's service changes at every sample) always finds a copy
# that parses when it starts again. tests/unit/sched/state_file_test.cc kills a saving
# process at finer instants.
# slurmctld killed with SIGKILL at random instants of the ledger's saves restores a ledger every
# time
@test "slurmctld killed mid-save: a ledger restored" {
  site_params interval=1s
  log=$(sed -n 's/^SlurmctldLogFile=//p' "$SLURM_CONF")
  running=$(submit -o /dev/null --dl-gpus=2 --wrap 'sleep 300')
  wait_state "$running" RUNNING 30
  # Killed before a save of its job state that knows the running job, slurmctld forgets
  # the job and hands its id to the next submission while the old job's steps still run
  # on the nodes: the next test's job then failed at its first srun (CI). slurmctld saves
  # a change within 5 s of its previous save (SAVE_MAX_WAIT, src/slurmctld/state_save.c),
  # so the kills start 6 s after the job runs; the ledger is saved meanwhile.
  sleep 6
  first=1
  for delay in 0.4 1.1 1.7 2.3 0.9; do
    restored=$(grep -c 'dl: site_factor: service of [0-9]* jobs restored' "$log" || true)
    kill -9 "$(ctld_pid)"
    wait_until 30 '! scontrol ping | grep -q "is UP"'
    slurmctld -f "$SLURM_CONF"
    wait_until 30 'scontrol ping | grep -q "is UP"'
    # One copy parsed every time, and none refused; the first holds the running job.
    # (Later, the job's fate is Slurm's: 24.11 killed this often may recover it as a job
    # that never ran, which the ledger rightly drops.)
    [ "$(grep -c 'dl: site_factor: service of [0-9]* jobs restored' "$log")" -gt "$restored" ]
    [ $first = 0 ] || tail -n 1 < <(grep 'jobs restored' "$log") | grep -q 'service of [1-9][0-9]* jobs'
    first=0
    sleep "$delay"
  done
  ! grep -q "dl: site_factor: couldn't restore" "$log" || false
}

# site_factor/dl keeps ledger entries only for jobs that have run: a pending job Slurm
# never requeued (restart count 0) is scored from its record alone. With
# DL_SITE_FACTOR_BASELINE in slurmctld's environment every other sample is Slurm's own
# refresh of the pending jobs' priorities alone (bench/sched/lock_hold's baseline).
# the ledger keeps only jobs that have run; DL_SITE_FACTOR_BASELINE alternates Slurm's own refresh
# with the plugin's
@test "the ledger keeps run jobs; the baseline switch" {
  site_params interval=1s
  state=$(sed -n 's/^StateSaveLocation=//p' "$SLURM_CONF")/site_factor_dl.state
  log=$(sed -n 's/^SlurmctldLogFile=//p' "$SLURM_CONF")
  running=$(submit -o /dev/null -N4 --gres=gpu:2 --wrap 'sleep 300')
  wait_state "$running" RUNNING 30
  pending=$(submit -o /dev/null --gres=gpu:1 --wrap true)
  wait_until 30 "grep -q '^$running ' '$state'"
  sleep 2 # two samples that saw the pending job
  [ "$(job_state "$pending")" = PENDING ]
  ! grep -q "^$pending " "$state" || false
  touch "$BATS_TEST_TMPDIR/restart-ctld" # teardown starts it again without the variable
  DL_SITE_FACTOR_BASELINE=1 "$DL_ROOT/scripts/minicluster" restart-ctld
  mark=$(wc -l <"$log")
  scontrol setdebug debug # the samples' lines (teardown's restart sets it back)
  samples() { tail -n +"$((mark + 1))" "$log" | grep -o 'dl: site_factor: \(baseline\|sampled\)'; }
  wait_until 30 '[ "$(samples | grep -c baseline)" -ge 3 ]'
  samples
  # Alternating, never the same kind twice in a row.
  [ -z "$(samples | uniq -d)" ]
  tail -n +"$((mark + 1))" "$log" |
    grep -q "dl: site_factor: baseline, Slurm's refresh alone: [0-9]* jobs, [1-9][0-9]* priorities set; job write lock held [0-9.]* ms"
  [ "$(job_state "$running")" = RUNNING ]
}

# reshape=yes: a pending even gang that cannot start in its split starts in another, also
# behind a higher job that waits (as Slurm's backfill starts a job there); one with -N keeps
# its own
@test "reshape=yes: an even gang starts in another split" {
  # One GPU taken on each node: 4 GPUs as 2x2 cannot start, 4x1 can.
  for n in 1 2 3 4; do
    busy=$(submit -o /dev/null -w "n$n" --gres=gpu:1 --wrap 'sleep 300')
  done
  wait_state "$busy" RUNNING 30
  pinned=$(submit -o /dev/null --dl-gpus=4 --dl-placement=even -N2 --wrap 'srun hostname')
  even=$(submit -o out.txt --dl-gpus=4 --dl-placement=even --wrap 'srun hostname | sort | uniq -c')
  sleep 3 # samples of the default parameters: no reshape
  [ "$(job_field "$even" NumNodes)" = 2-2 ]
  [ "$(comment_of "$even")" = "dl: 4 GPUs as 2x2 even" ]
  site_params interval=1s,reshape=yes
  log=$(sed -n 's/^SlurmctldLogFile=//p' "$SLURM_CONF")
  mark=$(wc -l <"$log")
  scontrol setdebug debug
  # The job with -N first cannot start and is not reshaped; the pass goes on past it and
  # reshapes the one behind it, which the backfill scheduler starts (the busy jobs have no
  # time limit: it delays nothing).
  wait_state "$even" COMPLETED 30
  scontrol setdebug info
  tail -n +"$((mark + 1))" "$log" | grep -q "dl: site_factor: reshape looked at 2 of 2 waiting jobs, planned 1"
  [ "$(job_state "$pinned")" = PENDING ]
  [ "$(comment_of "$pinned")" = "dl: 4 GPUs as 2x2 even (-N 2)" ]
  [ "$(job_field "$pinned" TresPerNode)" = $GPU_TRES:2 ]
  [ "$(comment_of "$even")" = "dl: 4 GPUs as 4x1 even (reshaped from 2x2)" ]
  [ "$(job_field "$even" NumNodes)" = 4 ]
  [ "$(job_field "$even" TresPerNode)" = $GPU_TRES:1 ]
  # One rank per GPU, one per node.
  [ "$(awk '{print $1}' out.txt | sort -u)" = 1 ]
  [ "$(wc -l <out.txt)" -eq 4 ]
  grep -q "dl: site_factor: JobId=$even reshaped from 2x2 to 4x1, which fits now" "$log"
  ! grep -q "JobId=$pinned reshaped" "$log" || false
}

# reshape=yes trusts no comment: a user's plain job whose comment claims to be an even gang is not
# reshaped, nor is a job array
@test "reshape=yes trusts no comment" {
  site_params interval=1s,reshape=yes
  for n in 1 2 3 4; do
    busy=$(submit -o /dev/null -w "n$n" --gres=gpu:1 --wrap 'sleep 300')
  done
  wait_state "$busy" RUNNING 30
  forged=$(as_dltest sbatch --parsable -o /dev/null -N2 --gres=gpu:2 --ntasks-per-node=2 --wrap 'srun hostname')
  as_dltest scontrol update job "$forged" Comment="dl: 4 GPUs as 2x2 even"
  [ "$(comment_of "$forged")" = "dl: 4 GPUs as 2x2 even" ]
  sleep 4 # samples with reshape
  [ "$(job_state "$forged")" = PENDING ]
  [ "$(job_field "$forged" NumNodes)" = 2-2 ]
  [ "$(job_field "$forged" TresPerNode)" = $GPU_TRES:2 ]
  log=$(sed -n 's/^SlurmctldLogFile=//p' "$SLURM_CONF")
  ! grep -q "JobId=$forged reshaped" "$log" || false
  # Nor is a job array's pending record, which stands for all its tasks.
  scancel "$forged"
  array=$(submit -o /dev/null --array=0-1 --dl-gpus=4 --dl-placement=even --wrap 'srun hostname')
  sleep 4
  [ "$(comment_of "$array")" = "dl: 4 GPUs as 2x2 even" ]
  [ "$(job_field "$array" TresPerNode)" = $GPU_TRES:2 ]
  ! grep -q "JobId=${array}.* reshaped" "$log" || false
}

# Last in this file: it restarts slurmctld twice (another PreemptType and back).
# a plain job and a DL job without --dl-preemptible in low are both preempted by a job in high
@test "high preempts plain and DL jobs in low" {
  scontrol update PartitionName=low GraceTime=3
  grep -q '^PreemptType=preempt/dl' "$SLURM_CONF"
  preempted_by_high plain
  preempted_by_high dl
  # The same plain jobs under preempt/partition_prio, which select/cons_tres treats
  # specially by its name: the site that moves to preempt/dl sees the same.
  cp "$SLURM_CONF" "$BATS_TEST_TMPDIR/slurm.conf.saved"
  touch "$BATS_TEST_TMPDIR/restart-ctld"
  sed -i 's|^PreemptType=.*|PreemptType=preempt/partition_prio|' "$SLURM_CONF"
  "$DL_ROOT/scripts/minicluster" restart-ctld
  scontrol update PartitionName=low GraceTime=3
  preempted_by_high plain
}
