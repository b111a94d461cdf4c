#!/usr/bin/env bats
# Under accounting, as most sites run Slurm: a cluster of its own with slurmdbd, MariaDB
# and AccountingStorageEnforce=associations,limits,qos (scripts/minicluster --accounting).
# The plugins work there, and reshape=yes cannot take a job past its owner's limits.

load helpers

setup_file() {
  export ACCT_DIR="$DL_BUILD_DIR/test-clusters/accounting" # munged must reach it
  "$DL_ROOT/scripts/minicluster" up --dir "$ACCT_DIR" \
    --port-base $((${DL_MINICLUSTER_PORT_BASE:-16800} + 2200)) --accounting \
    --priority-params interval=1s,reshape=yes >/dev/null
}
teardown_file() {
  "$DL_ROOT/scripts/minicluster" down --dir "$ACCT_DIR" >/dev/null 2>&1 || true
}

setup() {
  export SLURM_CONF=$ACCT_DIR/slurm.conf
  cd /home/dltest
  DLRUN=$DL_BUILD_DIR/launcher/dlrun
  TRAINER=$DL_BUILD_DIR/tests/integration/dlrun_trainer
}
teardown() {
  cancel_all
  scancel --quiet -u dltest 2>/dev/null || true
  scancel --quiet -u dlother 2>/dev/null || true
  sacctmgr -i modify user dltest set MaxTRES=node=-1 >/dev/null 2>&1 || true
}

comment_of() { scontrol show job "$1" | sed -n 's/^ *Comment=\(.*[^ ]\) *$/\1/p'; }
log_of_ctld() { sed -n 's/^SlurmctldLogFile=//p' "$SLURM_CONF"; }

# accounting: a DL job of an unprivileged user runs under dlrun, checkpoints and is in sacct
@test "accounting: a user's DL job runs and is in sacct" {
  job=$(as_dltest sbatch --parsable -N2 --ntasks-per-node=1 --dl-gpus=2 --dl-ckpt-every=1s \
    -o out.txt --wrap "srun --mpi=pmix $DLRUN $TRAINER --steps 30 --step-ms 100")
  wait_state "$job" 'COMPLETED|FAILED' 90
  [ "$(job_state "$job")" = COMPLETED ]
  grep -q 'checkpoint rank=0 ' out.txt
  wait_until 30 "sacct -n -X -j $job -o State%20,User%10,Account%10 | grep -q 'COMPLETED *dltest *dl'"
}

# reshape=yes (hostile, as dltest): a reshape that would break the owner's node limit is refused;
# without the limit it happens
@test "reshape=yes (hostile): no reshape past a node limit" {
  # One GPU taken on each node: 4 GPUs as 2x2 cannot start, 4x1 can.
  for n in 1 2 3 4; do
    busy=$(submit -o /dev/null -w "n$n" --gres=gpu:1 --wrap 'sleep 300')
  done
  wait_state "$busy" RUNNING 30
  # Without a limit: reshaped as its owner may.
  free=$(as_dlother sbatch --parsable -o /dev/null --dl-gpus=4 --dl-placement=even --wrap 'srun hostname')
  wait_state "$free" COMPLETED 60
  [ "$(comment_of "$free")" = "dl: 4 GPUs as 4x1 even (reshaped from 2x2)" ]
  # Two nodes per job for dltest: the reshape over four breaks it.
  sacctmgr -i modify user dltest set MaxTRES=node=2 >/dev/null
  log=$(log_of_ctld)
  mark=$(wc -l <"$log")
  held=$(as_dltest sbatch --parsable -o /dev/null --dl-gpus=4 --dl-placement=even --wrap 'srun hostname')
  wait_until 30 "tail -n +$((mark + 1)) '$log' | grep -q 'dl: site_factor: JobId=$held not reshaped to 4x1: '"
  sleep 3 # more samples: refused each time, logged once
  [ "$(tail -n +"$((mark + 1))" "$log" | grep -c "JobId=$held not reshaped")" = 1 ]
  [ "$(job_state "$held")" = PENDING ]
  [[ "$(job_field "$held" NumNodes)" =~ ^2(-2)?$ ]]
  [ "$(comment_of "$held")" = "dl: 4 GPUs as 2x2 even" ]
  ! grep -q "JobId=$held reshaped" "$log" || false
}
