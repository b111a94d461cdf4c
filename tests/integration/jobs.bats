#!/usr/bin/env bats
# dl-jobs: the user's DL jobs at a glance, read from slurmctld through libslurm; a
# pending job shows Slurm's expected start (the backfill estimate) and why it waits.

load helpers

dljobs() { "$DL_BUILD_DIR/launcher/dl-jobs" "$@"; }
# A field of one job in `dl-jobs --json` output, as Python prints it.
json_field() {
  /usr/bin/python3 -c '
import json, sys
jobs = {j["id"]: j for j in json.load(sys.stdin)["jobs"]}
v = jobs[sys.argv[1]]
for k in sys.argv[2].split("."):
    v = None if v is None else v[k]
print("" if v is None else v)' "$@"
}

setup() {
  cd "$BATS_TEST_TMPDIR"
  local deadline=$((SECONDS + 60))
  while [ -n "$(squeue -h -o %i)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
}
teardown() {
  cancel_all
  scancel --quiet -u dlother 2>/dev/null || true
}

# dl-jobs: a DL job queued behind a running one shows Slurm's expected start and why it waits
@test "dl-jobs: a queued job's expected start and why" {
  big=$(submit --dl-gpus=8 -t 10 --wrap 'sleep 300')
  wait_state "$big" RUNNING 60
  small=$(submit --dl-gpus=2 -t 5 --wrap 'sleep 1')
  plain=$(submit -t 5 --wrap 'sleep 300')
  # The backfill scheduler (bf_interval=2) estimates the start: the end of the big job.
  wait_until 30 '[ -n "$(dljobs --json | json_field "$small" expected_start)" ]'
  out=$(dljobs --json)
  [ "$(json_field "$small" state <<<"$out")" = PENDING ]
  [[ "$(json_field "$small" reason <<<"$out")" =~ ^(Resources|Priority)$ ]]
  in_s=$(json_field "$small" expected_start_in_s <<<"$out")
  [ "$in_s" -gt 0 ]
  # The same estimate squeue --start shows (slurmctld's, not one of our own).
  expected=$(date -d "$(json_field "$small" expected_start <<<"$out")" +%s)
  squeue_start=$(date -d "$(squeue -h --start -j "$small" -o %S)" +%s)
  [ $((expected - squeue_start)) -le 5 ] && [ $((squeue_start - expected)) -le 5 ]
  [ "$(json_field "$big" state <<<"$out")" = RUNNING ]
  [ "$(json_field "$big" shape <<<"$out")" = "8 GPUs as 4x2" ]
  # A job without --dl-* options is not a DL job.
  run json_field "$plain" state <<<"$out"
  [ "$status" -ne 0 ]
  [ "$(dljobs --all-jobs --json | json_field "$plain" state)" = PENDING ]

  # The table says the same for people.
  run dljobs
  [ "$status" -eq 0 ]
  [[ "$output" == *"$small"*"PENDING ("*")"*"in "*"(at "* ]]
  [[ "$output" == *"$big"*RUNNING*"8 GPUs as 4x2"* ]]
}

# dl-jobs: dlrun's status line as fields, and only the caller's own jobs
@test "dl-jobs: the status line, the caller's jobs only" {
  job=$(submit --dl-gpus=2 -t 5 --wrap 'sleep 300')
  wait_state "$job" RUNNING 60
  scontrol update JobId="$job" Comment="$(job_comment "$job") | RUNNING step 40, ckpt 30 (5s ago), loss=0.5"
  out=$(dljobs --json)
  [ "$(json_field "$job" status.step <<<"$out")" = 40 ]
  [ "$(json_field "$job" status.ckpt_step <<<"$out")" = 30 ]
  [ "$(json_field "$job" status.metrics <<<"$out")" = loss=0.5 ]
  [ "$(json_field "$job" restarts <<<"$out")" = 0 ]
  # Restarts inside the allocation count too: the status line carries DL_RESTART_COUNT.
  scontrol update JobId="$job" Comment="$(job_comment "$job" | sed 's/ | .*//') | RUNNING step 41, restarts 2"
  out=$(dljobs --json)
  [ "$(json_field "$job" restarts <<<"$out")" = 2 ]
  [ "$(json_field "$job" requeues <<<"$out")" = 0 ]
  [ "$(json_field "$job" status.step <<<"$out")" = 41 ]
  # Another user sees none of root's jobs unless asking for everyone's (its own recent
  # jobs from other test files may be listed).
  run runuser -u dltest -- env SLURM_CONF="$SLURM_CONF" "$DL_BUILD_DIR/launcher/dl-jobs"
  [ "$status" -eq 0 ]
  [[ "$output" != *"$job"* ]]
  [ "$(runuser -u dltest -- env SLURM_CONF="$SLURM_CONF" "$DL_BUILD_DIR/launcher/dl-jobs" \
    --all-users --json | json_field "$job" state)" = RUNNING ]
}

@test "dl-jobs: a bad option is one clear line and exit 2" {
  run dljobs --bogus
  [ "$status" -eq 2 ]
  [[ "$output" == *"--bogus"* ]]
}

# dl-jobs -a: another user's job name and status line are escaped, not sent to the terminal
@test "dl-jobs -a: others' strings are escaped" {
  # dlother names a job and writes its comment's status line with terminal escapes
  # (a window title, clearing the screen, a colour).
  job=$(runuser -u dlother -- env SLURM_CONF="$SLURM_CONF" sbatch --parsable --chdir=/tmp \
    -o /dev/null --dl-gpus=1 -t 5 -J $'x\e]0;owned\ay' --wrap 'sleep 300' | cut -d';' -f1)
  wait_state "$job" RUNNING 60
  esc=$'\e[2J\e[31m'
  runuser -u dlother -- env SLURM_CONF="$SLURM_CONF" scontrol update JobId="$job" \
    Comment="$(job_comment "$job") | RUNNING step 4, loss=${esc}red"
  [[ "$(job_comment "$job")" == *$'\e[2J'* ]]
  run as_dltest "$DL_BUILD_DIR/launcher/dl-jobs" -a
  [ "$status" -eq 0 ]
  [[ $output == *"$job"* ]]
  ! LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' <<<"$output" || false
  [[ $output == *'x\x1b]0;owned\x07y'* ]]
  [[ $output == *'loss=\x1b[2J\x1b[31mred'* ]]
}
