#!/usr/bin/env bats
# The README's quickstart, run as written: its batch script and commands, with the
# shipped examples/train.py, are preempted on the mini-cluster and resume; the log shows
# the lines the README shows.

load helpers

setup() { cd "$BATS_TEST_TMPDIR"; }

teardown() {
  show_on_failure train-*.out
  cancel_all
}

# The fenced block after the line "<!-- quickstart:$1 -->" in README.md.
readme_block() {
  awk -v mark="<!-- quickstart:$1 -->" '
    $0 == mark { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$DL_ROOT/README.md"
}

# The log block after "the log shows": each line's text from "dlrun:" up to its first
# digit (the steps, times, paths and nodes differ from run to run).
readme_log_lines() {
  awk '/^When a higher-priority job preempts it/ { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$DL_ROOT/README.md" | sed 's/^.*\] \(dlrun: [^0-9]*\).*/\1/'
}

# the README's quickstart, as written: preempted, it checkpoints, requeues and resumes
@test "the README's quickstart, as written" {
  readme_block train.sbatch >train.sbatch
  readme_block commands >commands.sh
  [ -s train.sbatch ] && [ -s commands.sh ]
  grep -q '^dlrun ' train.sbatch
  cp "$DL_ROOT/examples/train.py" .
  # As a user whose environment has slurm-dl installed: dlrun on PATH, slurm_dl importable.
  PATH=/usr/bin:$DL_BUILD_DIR/launcher:$PATH PYTHONPATH=$DL_ROOT/python \
    DL_CKPT_LIB=$DL_BUILD_DIR/ckpt/.libs/libdlckpt.so.0 bash -e commands.sh >submit.txt
  job=$(sed -n 's/^Submitted batch job \([0-9]*\)$/\1/p' submit.txt)
  [ -n "$job" ]
  wait_until 120 'grep -q "\] epoch 1 loss" "train-$job.out"'
  high=$(submit -p high -N4 --exclusive -o /dev/null --wrap 'sleep 2')
  wait_until 180 'sed -n "/dlrun: resuming step/,\$p" "train-$job.out" | grep -q "\] epoch [0-9]* loss"'
  [ "$(job_field "$job" Restarts)" = 1 ]
  while IFS= read -r line; do
    grep -qF "$line" "train-$job.out" || {
      echo "the README's log line '$line' is not in the job's output" >&2
      false
    }
  done < <(readme_log_lines)
  [ "$(readme_log_lines | wc -l)" -ge 3 ]
}
