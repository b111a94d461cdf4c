#!/usr/bin/env bats
# Hyperparameter search (issue 19): dl-search runs examples/search_asha.yaml's ASHA search
# on the mini-cluster, every rung of every trial a Slurm job; a promoted trial resumes
# from its own checkpoint at the step after its last rung; a driver killed with SIGKILL
# mid-search carries on without a duplicate trial or a lost result; a trial that always
# fails is retried, then failed, and the search goes on; a bad file is rejected with file,
# line and reason, nothing queued; pause, resume, stop; the driver as a batch job
# (--as-job); a trial preempted by a `high` job is requeued, resumes from its own
# checkpoint and is counted once; one trial paused (checkpointed, held), resumed from its
# checkpoint, another stopped across a driver kill -9; only the owner may; `dl-exp plot`
# and `dl-exp serve`'s page mark the rungs; asha_mode: stopping; a paused trial gives its
# slot of max_concurrent_trials back, and a resumed one waits for a free slot; a trial
# promoted as its job ends a rung continues in that job (no new job, no resume), and
# paused or preempted while it continues it is requeued and resumed at its rung; a trial
# told to end after its rung ranks there before its job has left. A driver killed at each
# of its calls to Slurm, and right after a continuation decision, is
# tests/unit/exp/search_driver_test.cc's.

load helpers

setup_file() {
  export PATH=$DL_BUILD_DIR/launcher:$DL_BUILD_DIR/exp:$PATH
  export DL_CKPT_LIB=$DL_BUILD_DIR/ckpt/.libs/libdlckpt.so.0
  export DL_SEARCH_EXAMPLES=$DL_ROOT/examples
}

setup() {
  cd "$BATS_TEST_TMPDIR"
  export DL_EXP_ROOT=$BATS_TEST_TMPDIR/experiments
  # Names unique to this run: Slurm keeps finished jobs (and their names) for a while.
  export EXP=s$$-$BATS_TEST_NUMBER
  sed "s/^name: asha-demo/name: $EXP/" "$DL_ROOT/examples/search_asha.yaml" >asha.yaml
}

teardown() {
  if [ -f driver.pid ]; then kill -9 "$(cat driver.pid)" 2>/dev/null || true; fi
  if [ -f serve.pid ]; then kill "$(cat serve.pid)" 2>/dev/null || true; fi
  cancel_all
}

check_json() { python3 -c "import json, sys; d = json.load(sys.stdin); $1"; }

# The search's invariants (checks/search.py: invariants): one job per run, every step once,
# every promotion resumed from its own trial's checkpoint.
check_search() {
  local exp=$1
  dl-search status "$exp" --json >status.json
  dl-exp show "$exp" --json >show.json
  dl-exp metrics "$exp" --json >metrics.json
  squeue -h --states=all --me -o '%j|%i|%T' | grep "^dls\.$exp\." >jobs.txt || true
  checks search invariants "$exp"
}

# search 1: an ASHA search end to end: rungs, promotions resumed from their checkpoints, stopped
# trials, the best trial
# bats test_tags=stacks
@test "search 1: an ASHA search end to end" {
  run dl-search submit asha.yaml
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"search '$EXP' complete; best trial t"* ]]
  check_search "$EXP"
  check_json '
assert d["rungs"] == [2, 4, 8], d["rungs"]
s = [t["state"] for t in d["trials"]]
assert len(s) == 8 and s.count("completed") >= 1 and s.count("stopped") >= 4, s
best = [t for t in d["trials"] if t["id"] == d["best"]][0]
assert best["state"] == "completed" and best["rung"] == 2, best
assert any(o["kind"] == "resume" and o["rung"] == 2 for o in d["operations"]), d["operations"]
' <status.json
  # dl-exp knows the experiment like any other, and its best trial.
  run dl-exp best "$EXP" --metric loss --json
  [ "$status" -eq 0 ]
  run dl-search status "$EXP"
  [[ $output == *"RUNGS 2 4 8"*"STATE complete"* && $output == *"BEST t"* ]]
  # The columns line up with job ids of any length (8 digits or more here: a trial run
  # as two jobs overflows 16 columns).
  dl-search status "$EXP" >table.txt
  checks search table_aligned
  # The plot marks each rung's step (its budget - 1) and who was promoted or stopped there.
  dl-exp plot "$EXP" -o plot.svg
  checks search plot_marks_rungs
  # The web page marks them too, on the curve of the metric they rank by.
  port=$((${DL_MINICLUSTER_PORT_BASE:-6800} + 91))
  dl-exp serve --port "$port" 2>serve.txt 3>&- &
  echo $! >serve.pid
  wait_until 20 "grep -q 'serving http' serve.txt"
  token=$(grep -o 'token=[0-9a-f]*' serve.txt | cut -d= -f2)
  wait_until 20 "curl -sf http://127.0.0.1:$port/api/experiments?token=$token >/dev/null"
  curl -sf "http://127.0.0.1:$port/api/rungs/$EXP?token=$token" >rungs.json
  # The second stack has no browser (docs/compatibility.md): the page is drawn by the
  # browser alone, and the first stack checks it.
  if command -v chromium >/dev/null; then
    timeout 60 chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=5000 \
      --dump-dom "http://127.0.0.1:$port/?exp=$EXP&token=$token" 2>/dev/null >dom.html
  fi
  checks search page_marks_rungs
}

# search 2: the driver killed with SIGKILL mid-search carries on: no duplicate, no loss (killed at
# each of its calls to Slurm, and right after sbatch before it recorded the job, in
# tests/unit/exp/search_driver_test.cc)
@test "search 2: driver killed: no duplicate, no loss" {
  # Slower trials (0.2 s a step), so that the kill lands mid-search.
  sed -i 's|search_trainer.py|search_trainer.py --step-ms 200|' asha.yaml
  # The first driver is killed at whatever it is doing once a few rungs are done.
  dl-search submit asha.yaml 2>driver1.txt &
  echo $! >driver.pid
  wait_until 60 '[ "$(grep -c "rung [0-9] done" driver1.txt)" -ge 3 ]'
  kill -9 "$(cat driver.pid)"
  wait "$(cat driver.pid)" || true
  rm driver.pid
  [ -f "$DL_EXP_ROOT/$EXP/search.lock" ]  # left behind, taken over below
  run dl-search drive "$EXP"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"complete; best trial"* ]]
  check_search "$EXP"
}

# search 3: a trial that always fails is retried within its restart budget, then failed; the search
# goes on
@test "search 3: an always-failing trial fails, search goes on" {
  cat >crashy.yaml <<EOF
name: $EXP
trial:
  command: srun --mpi=pmix dlrun /usr/bin/python3 $DL_ROOT/examples/search_trainer.py
  sbatch: [--ntasks=1, --dl-max-restarts=0]
hyperparameters:
  crash: {type: categorical, values: [true, false]}
searcher:
  name: grid
  metric: loss
  budget: 4
  max_trials: 2
  max_concurrent_trials: 1
  max_restarts: 1
EOF
  run dl-search submit crashy.yaml
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"retry 1 of 1 after: job "*" ended HELD"* ]]
  dl-search status "$EXP" --json | check_json '
t = {x["id"]: x for x in d["trials"]}
assert t["t001"]["state"] == "failed" and t["t001"]["restarts"] == 1, t
assert t["t002"]["state"] == "completed", t
assert d["best"] == "t002" and d["finished"], d'
  dl-exp show "$EXP" --json | check_json '
assert {t["id"]: t["state"] for t in d["trials"]} == {"t001": "failed", "t002": "completed"}, d["trials"]'
  # Two runs of t001 (the first and its retry), one of t002.
  [ "$(squeue -h --states=all --me -o %j | grep -c "^dls\.$EXP\.t001\.")" = 2 ]
  [ "$(squeue -h --states=all --me -o %j | grep -c "^dls\.$EXP\.t002\.")" = 1 ]
}

# search 4: a bad experiment file is rejected with file, line and reason; nothing queued or created
@test "search 4: a bad experiment file: file, line, reason" {
  sed 's/divisor: 2/divisor: 1/' asha.yaml >bad.yaml
  run dl-search submit bad.yaml
  echo "$output"
  [ "$status" -eq 2 ]
  line=$(grep -n 'divisor: 1' bad.yaml | cut -d: -f1)
  [ "$output" = "dl-search: bad.yaml:$line: searcher.divisor: expected a number > 1, not '1'" ]
  sed 's/type: log/type: logarithmic/' asha.yaml >bad2.yaml
  run dl-search submit bad2.yaml
  [ "$status" -eq 2 ]
  [[ $output == *"bad2.yaml:"*": hyperparameters.lr.type: 'logarithmic': expected int, float, log or categorical" ]]
  queue_empty
  [ ! -e "$DL_EXP_ROOT/$EXP" ]
}

# search 5: pause holds the search, resume carries on, stop ends it with every trial stopped
@test "search 5: pause, resume and stop a search" {
  sed -i 's|search_trainer.py|search_trainer.py --step-ms 400|' asha.yaml
  dl-search submit asha.yaml 2>driver.txt &
  echo $! >driver.pid
  wait_until 30 '[ "$(grep -c " job [0-9]* (create" driver.txt)" -ge 4 ]'
  dl-search pause "$EXP"
  wait_until 30 'grep -q "search .$EXP.: paused" driver.txt'
  # While paused the running rungs end and nothing new starts.
  wait_until 60 '[ -z "$(squeue -h --me -t RUNNING -o %j | grep "^dls\.$EXP\.")" ]'
  n=$(grep -c ' job [0-9]* (' driver.txt)
  sleep 2
  [ "$(grep -c ' job [0-9]* (' driver.txt)" = "$n" ]
  dl-search resume "$EXP"
  wait_until 30 '[ "$(grep -c " job [0-9]* (" driver.txt)" -gt "$n" ]'
  dl-search stop "$EXP"
  wait "$(cat driver.pid)"
  rm driver.pid
  grep -q "search '$EXP' stopped" driver.txt
  wait_until 30 '[ -z "$(squeue -h --me -o %j | grep "^dls\.$EXP\.")" ]'
  dl-exp show "$EXP" --json | check_json '
s = [t["state"] for t in d["trials"]]
assert s and all(x in ("stopped", "completed") for x in s), s'
}

@test "search 6: --as-job runs the driver as a batch job" {
  run dl-search submit --as-job asha.yaml
  [ "$status" -eq 0 ]
  driver=$(echo "$output" | tail -n 1)
  [[ $driver =~ ^[0-9]+$ ]]
  [ "$(job_field "$driver" JobName)" = "dls-driver.$EXP" ]
  wait_state "$driver" COMPLETED 120
  grep -q "search '$EXP' complete; best trial t" "$DL_EXP_ROOT/$EXP/driver.$driver.out"
  dl-search status "$EXP" --json | check_json 'assert d["finished"] and d["complete"], d'
}

# search 7: a trial (time_min one rung) preempted by a high job checkpoints, is requeued, resumes
# from its checkpoint and counts once
@test "search 7: a preempted trial resumes, counts once" {
  # One trial of 40 steps at 0.2 s a step: running when the high job arrives.
  cat >preempt.yaml <<EOF
name: $EXP
trial:
  command: srun --mpi=pmix dlrun /usr/bin/python3 $DL_ROOT/examples/search_trainer.py --step-ms 200
  sbatch: [--partition=low, --ntasks=1, --dl-preemptible, --dl-grace=30s, --dl-max-restarts=0]
  step_seconds: 0.2
hyperparameters:
  act: {type: categorical, values: [relu]}
searcher:
  name: grid
  metric: loss
  budget: 40
  max_trials: 1
  max_concurrent_trials: 1
  max_restarts: 0
EOF
  dl-search submit preempt.yaml >driver.txt 2>&1 &
  echo $! >driver.pid
  past5() {
    dl-exp metrics "$EXP" --json 2>/dev/null | python3 -c 'import json, sys
sys.exit(not any(m["step"] >= 5 for m in json.load(sys.stdin)["metrics"]))'
  }
  wait_until 60 past5
  job=$(squeue -h --me -o '%i|%j' | sed -n "s/|dls\.$EXP\.t001\.0\$//p")
  [ -n "$job" ]
  # time_min is one rung and the warning time (40 x 0.2 s + 30 s + 30 s, in whole minutes),
  # not job_submit/dl's 4 x (30 s + 30 s).
  [ "$(job_field "$job" TimeMin)" = 00:02:00 ]
  # Every node, whole: the trial's job is preempted (requeued), then runs again.
  high=$(submit -p high -N4 --exclusive -o high.txt --wrap 'sleep 2')
  wait_state "$high" COMPLETED 120
  wait "$(cat driver.pid)"
  rm driver.pid
  cat driver.txt
  grep -q "search '$EXP' complete; best trial t001" driver.txt
  [ "$(job_field "$job" Restarts)" = 1 ]
  # The second run started from the first's checkpoint, not from step 0.
  dl-exp show "$EXP" --json | check_json '
ev = [e for e in d["events"] if e["kind"] == "run_started"]
assert len(ev) == 2 and [e["restarts"] for e in ev] == [0, 1], d["events"]
assert [e["kind"] for e in d["events"]].count("requeued") == 1, d["events"]
ck = [c["path"] for t in d["trials"] for c in t["checkpoints"]]
assert ev[1]["reason"].startswith("resumed from ") and ev[1]["reason"][13:] in ck, (ev, ck)'
  # One trial, one job (the same one, requeued), every step 0..39 once.
  check_search "$EXP"
  dl-search status "$EXP" --json | check_json '
assert [(t["id"], t["state"], t["restarts"]) for t in d["trials"]] == [("t001", "completed", 0)], d["trials"]
assert [o["kind"] for o in d["operations"] if o["kind"] in ("create", "resume")] == ["create"], d["operations"]'
}

# A search of 4 trials, 2 at a time, rungs of 8 and 16 steps at 0.5 s a step: long enough
# to pause or stop a trial in the middle of a rung (4 s), also on a busy machine.
slow_search() {
  cat >slow.yaml <<EOF
name: $EXP
trial:
  command: srun --mpi=pmix dlrun /usr/bin/python3 $DL_ROOT/examples/search_trainer.py --step-ms 500
  sbatch: [--partition=low, --ntasks=1, --dl-preemptible, --dl-grace=30s, --dl-max-restarts=0]
hyperparameters:
  lr: {type: log, minval: 0.001, maxval: 1.0}
  width: {type: int, minval: 1, maxval: 8}
searcher:
  name: asha
  metric: loss
  max_trials: 4
  max_concurrent_trials: 2
  divisor: 2
  max_rungs: 2
  budget: 16
  seed: 3
  max_restarts: 0
EOF
}

# Whether trial $1 has reported step $2 or later.
reached() {
  dl-exp metrics "$EXP" "$1" --json 2>/dev/null | python3 -c 'import json, sys
sys.exit(not any(m["step"] >= int(sys.argv[1]) for m in json.load(sys.stdin)["metrics"]))' "$2"
}

# The newest job of trial $1.
job_of() { squeue -h --states=all --me -o '%i|%j' | sed -n "s/|dls\.$EXP\.$1\.[0-9]*\$//p" | tail -n 1; }

# search 8: one trial paused (checkpointed, held) and resumed from its own checkpoint, one paused
# between rungs, another stopped across a driver kill -9; bad trial names refused
@test "search 8: pause, resume and stop single trials" {
  slow_search
  dl-search submit slow.yaml 2>driver.txt &
  echo $! >driver.pid
  wait_until 60 'grep -q "t002: job [0-9]* (create" driver.txt'
  # A bad trial name: one message naming it and the trials there are; no control record
  # written (the trials' own run journals appear meanwhile).
  controls() { ls "$DL_EXP_ROOT/$EXP/journals" | grep '^control\.' || true; }
  controls >before.txt
  run dl-search pause "$EXP" t099
  [ "$status" -eq 2 ]
  [[ $output == "dl-search: pause: unknown trial 't099' in search '$EXP' (trials: t001, t002"*")" ]]
  run dl-search resume "$EXP" t001
  [ "$status" -eq 2 ]
  [ "$output" = "dl-search: resume: trial 't001' of search '$EXP' is not paused" ]
  controls | diff before.txt -
  # Pause t001 in the middle of its rung: Slurm's SIGTERM, dlrun's checkpoint, requeued held.
  job1=$(job_of t001)
  wait_until 60 'reached t001 1'
  dl-search pause "$EXP" t001
  wait_until 60 '[ "$(job_field "$job1" JobState)" = PENDING ] && [ "$(job_field "$job1" Reason)" = job_requeued_in_held_state ]' ||
    { cat driver.txt; scontrol show job "$job1"; false; }
  grep -q "t001: paused (dl-search pause)" driver.txt
  run dl-search status "$EXP"
  [[ $output == *"t001   paused "* ]]
  # Held, not failed: the search goes on without it (t003 takes its slot).
  wait_until 60 'reached t003 1'
  [ "$(job_field "$job1" JobState)" = PENDING ]
  # Stop t003 in the middle of its rung, and kill the driver once it saw the request
  # (before or after it cancelled the job: the next one replays the stop and cancels it if
  # need be; the kill between the two is search_driver_test's).
  dl-search stop "$EXP" t003
  wait_until 30 'grep -q "t003: stop requested" driver.txt'
  kill -9 "$(cat driver.pid)"
  wait "$(cat driver.pid)" || true
  # Pause t002 between rungs: once its rung-0 job has ended (before or after t003's stop,
  # whichever the machine's pace gives), while no driver runs, so that none can promote
  # it first. It is not promoted while paused (t004 ends rung 0 meanwhile), and the
  # search does not end without it.
  wait_until 60 '[ "$(job_field "$(job_of t002)" JobState)" = COMPLETED ]'
  dl-search pause "$EXP" t002
  dl-search drive "$EXP" 2>driver2.txt &
  echo $! >driver.pid
  wait_until 30 '[ "$(job_field "$(job_of t003)" JobState)" = CANCELLED ]'
  run dl-search stop "$EXP" t003
  [ "$status" -eq 2 ]
  [ "$output" = "dl-search: stop: trial 't003' of search '$EXP' is stopped; only a running or waiting trial can be stopped" ]
  wait_until 60 'cat driver.txt driver2.txt | grep -q "t004: rung 0 done"'
  run grep -q "t002: job [0-9]* (resume" driver2.txt
  [ "$status" -ne 0 ]
  run dl-search status "$EXP"
  [[ $output == *"t002   paused "* ]]
  dl-search resume "$EXP" t002
  # Resume t001: the same job runs again, from its own checkpoint.
  dl-search resume "$EXP" t001
  wait "$(cat driver.pid)"
  rm driver.pid
  cat driver.txt driver2.txt
  grep -q "t001: resumed (dl-search resume)" driver2.txt
  grep -q "search '$EXP' complete; best trial t" driver2.txt
  [ "$(job_field "$job1" Restarts)" = 1 ]
  check_search "$EXP"
  dl-search status "$EXP" --json | check_json '
t = {x["id"]: x for x in d["trials"]}
assert t["t003"]["state"] == "stopped" and t["t003"]["reason"] == "stopped by dl-search stop", t
assert t["t001"]["state"] in ("completed", "stopped") and t["t001"]["restarts"] == 0, t
assert t["t001"]["control"] == "running" and t["t003"]["control"] == "stopped", t
assert len(t) == 4, t  # the search went on: t004 took the place of the stopped trial
runs = [o["trial"] for o in d["operations"] if o["kind"] in ("create", "resume")]
assert runs.count("t003") == 1, runs  # never run again'
  dl-exp show "$EXP" --json | check_json '
import os
ev = [e for e in d["events"] if e["trial"] == "t001" and e["kind"] == "run_started"]
ck = [c for t in d["trials"] if t["id"] == "t001" for c in t["checkpoints"]]
assert len(ev) >= 2 and ev[1]["restarts"] == 1, ev
path = ev[1]["reason"][len("resumed from "):]
assert ev[1]["reason"].startswith("resumed from ") and path in [c["path"] for c in ck], (ev, ck)
assert 1 <= [c["step"] for c in ck if c["path"] == path][0] < 7, ck  # mid-rung
t3 = [t for t in d["trials"] if t["id"] == "t003"][0]
assert t3["state"] == "stopped", t3
assert all(os.path.isdir(c["path"]) for c in t3["checkpoints"]), t3  # kept'
}

# search 9: only the experiment's owner may pause, resume or stop it or its trials (a shared root)
@test "search 9: only the owner may pause, resume, stop" {
  shared=$(mktemp -d /tmp/dl-search-shared.XXXXXX)
  chmod 1777 "$shared"
  cat >tiny.yaml <<EOF
name: $EXP
trial:
  command: srun --mpi=pmix dlrun /usr/bin/python3 $DL_ROOT/examples/search_trainer.py
  sbatch: [--ntasks=1]
hyperparameters:
  act: {type: categorical, values: [relu]}
searcher:
  name: grid
  metric: loss
  budget: 2
  max_trials: 1
  max_concurrent_trials: 1
EOF
  DL_EXP_ROOT=$shared dl-search submit tiny.yaml
  before=$(ls "$shared/$EXP/journals" | wc -l)
  for user in dltest dlother; do
    for verb in pause resume stop; do
      run runuser -u "$user" -- env DL_EXP_ROOT="$shared" "$DL_BUILD_DIR/exp/dl-search" "$verb" "$EXP" t001
      echo "$output"
      [ "$status" -eq 2 ]
      [ "$output" = "dl-search: experiment '$EXP' in $shared belongs to root (uid 0); only its owner can pause, resume or stop it" ]
    done
    run runuser -u "$user" -- env DL_EXP_ROOT="$shared" "$DL_BUILD_DIR/exp/dl-search" stop "$EXP"
    [ "$status" -eq 2 ]
  done
  [ "$(ls "$shared/$EXP/journals" | wc -l)" = "$before" ]
  # The owner is told the search is over.
  run env DL_EXP_ROOT="$shared" dl-search stop "$EXP" t001
  [ "$status" -eq 2 ]
  [ "$output" = "dl-search: stop: search '$EXP' is over; trial 't001' is completed" ]
  rm -rf "$shared"
}

# search 10: asha_mode stopping: a trial in the top of its rung so far continues at once from its
# own checkpoint, the others stop at their rung
@test "search 10: asha_mode stopping" {
  # Every rung a job of its own here (search 12 continues in the job).
  printf '  asha_mode: stopping\n  continue_in_job: false\n' >>asha.yaml
  run dl-search submit asha.yaml
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"(resume to rung 1, 4 steps; continued from rung 0 (place 1 of "* ]]
  [[ $output == *"stopped (stopped at rung "* ]]
  check_search "$EXP"
  check_json '
assert d["searcher"]["asha_mode"] == "stopping", d["searcher"]
s = [t["state"] for t in d["trials"]]
assert len(s) == 8 and "waiting" not in s and s.count("completed") >= 1, s
ops = d["operations"]
assert not any(o["reason"].startswith("promoted") for o in ops), ops
assert all(o["reason"].startswith(("new trial", "continued from rung")) for o in ops if o["kind"] in ("create", "resume")), ops
' <status.json
}

# search 11: a paused trial gives its slot back while held; a resumed one waits for a free slot
# (across a driver kill -9), then goes first; never more than max_concurrent_trials at once
@test "search 11: a paused trial's slot; resumed goes first" {
  # Random search, 3 trials, 1 at a time, 12 steps of 0.3 s: t001 is paused mid-run,
  # t002 runs in its slot, t001 resumed meanwhile waits for t002 to end, then runs again
  # before t003 starts.
  cat >one.yaml <<EOF
name: $EXP
trial:
  command: srun --mpi=pmix dlrun /usr/bin/python3 $DL_ROOT/examples/search_trainer.py --step-ms 300
  sbatch: [--partition=low, --ntasks=1, --dl-grace=30s, --dl-max-restarts=0]
hyperparameters:
  lr: {type: log, minval: 0.001, maxval: 1.0}
searcher:
  name: random
  metric: loss
  budget: 12
  max_trials: 3
  max_concurrent_trials: 1
  seed: 5
  max_restarts: 0
EOF
  dl-search submit one.yaml 2>driver.txt &
  echo $! >driver.pid
  wait_until 60 'reached t001 1'
  job1=$(job_of t001)
  dl-search pause "$EXP" t001
  # Checkpointed and requeued held: its slot goes to t002 while it is held.
  wait_until 60 'grep -q "t002: job [0-9]* (create" driver.txt' || { cat driver.txt; false; }
  grep -q "t001: job $job1 held; its slot is free" driver.txt
  [ "$(job_field "$job1" JobState)" = PENDING ]
  [ "$(job_field "$job1" Reason)" = job_requeued_in_held_state ]
  # Resumed while t002 has the only slot: it waits, its job stays held.
  dl-search resume "$EXP" t001
  wait_until 30 'grep -q "t001: resumed (dl-search resume); waits for a free slot (1 of 1 taken)" driver.txt' ||
    { cat driver.txt; false; }
  # The driver killed now (kill -9) and started again: its journal says t001 waits.
  kill -9 "$(cat driver.pid)"
  wait "$(cat driver.pid)" || true
  dl-search drive "$EXP" 2>driver2.txt &
  echo $! >driver.pid
  wait_until 30 'grep -q "operation(s) replayed" driver2.txt'
  run dl-search status "$EXP"
  [[ $output == *"t001   resuming "* ]]
  [ "$(job_field "$job1" JobState)" = PENDING ]
  [ "$(job_field "$job1" Reason)" = job_requeued_in_held_state ]
  wait "$(cat driver.pid)"
  rm driver.pid
  cat driver.txt driver2.txt
  # t002's end gave the slot to t001 (the same job, released), before t003 was created.
  cat driver.txt driver2.txt |
    grep -o "t002: rung 0 done\|t001: released, runs again (resumed (a slot became free))\|t003: job [0-9]* (create" >order.txt
  sed -i 's/^t003: job [0-9]* (create$/t003 created/' order.txt
  printf '%s\n' "t002: rung 0 done" "t001: released, runs again (resumed (a slot became free))" "t003 created" | diff - order.txt
  [ "$(job_field "$job1" Restarts)" = 1 ]
  check_search "$EXP"
  # Never two trials at once: in the order of their steps' records, the trials run one
  # after the other (t001 before its pause, t002, t001 from its checkpoint, t003).
  dl-exp metrics "$EXP" --json | check_json '
m = sorted((x["time"], x["trial"], x["step"]) for x in d["metrics"] if x["name"] == "loss")
runs = []
for _, trial, step in m:
    if not runs or runs[-1][0] != trial:
        runs.append([trial, step])
assert [r[0] for r in runs] == ["t001", "t002", "t001", "t003"], runs
assert runs[2][1] > 0, runs  # t001 went on from its checkpoint, not from step 0'
}

# asha (stopping) with one slot: the first trial is the top of every rung when it ends it,
# so each of its promotions is the decision for the slot it frees: deterministic.
continue_search() {
  cat >cont.yaml <<EOF
name: $EXP
trial:
  command: srun --mpi=pmix dlrun /usr/bin/python3 $DL_ROOT/examples/search_trainer.py --step-ms 100
  sbatch: [--ntasks=1]
hyperparameters:
  lr: {type: log, minval: 0.001, maxval: 1.0}
searcher:
  name: asha
  asha_mode: stopping
  metric: loss
  budget: 8
  max_rungs: 3
  max_trials: 2
  max_concurrent_trials: 1
  seed: 3
EOF
}

# search 12: a trial promoted as its job ends a rung continues in that job: rungs 0 to 2 in one job,
# no resume
@test "search 12: a promoted trial continues in its job" {
  continue_search
  # The trial waits for the decision this long (default a few polls): no race with a slow
  # machine here.
  export DL_SEARCH_WAIT=30
  run dl-search submit cont.yaml
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"t001: job "*" continues (to rung 1, 4 steps; continued from rung 0"* ]]
  [[ $output == *"complete; best trial"* ]]
  check_search "$EXP"
  dl-search status "$EXP" --json >status.json
  checks search continued_in_one_job "$EXP"
  # One Slurm job for t001, and dl-search status shows it ran rungs 0 to 2.
  [ "$(squeue -h --states=all --me -o %j | grep -c "^dls\.$EXP\.t001\.")" = 1 ]
  run dl-search status "$EXP"
  echo "$output"
  [[ $output == *"t001   completed  2     0         $(cat job.txt):0-2 "* ]]
  # dl-exp: one trial, one run, its events say it continued.
  dl-exp show "$EXP" --json | check_json '
ev = [e for e in d["events"] if e["trial"] == "t001"]
assert [e["kind"] for e in ev].count("run_started") == 1, ev
assert [e["kind"] for e in ev].count("continued") == 2, ev
assert {t["id"]: t["state"] for t in d["trials"]}["t001"] == "completed", d["trials"]'
}

# One trial, rungs of 8, 16 and 32 steps at 0.2 s, with the sbatch options $1: it continues
# to rung 2 in its job. Started in the background; returns once it trains rung 2, with its
# job in job.txt.
one_trial_at_rung2() {
  cat >cont.yaml <<EOF
name: $EXP
trial:
  command: srun --mpi=pmix dlrun /usr/bin/python3 $DL_ROOT/examples/search_trainer.py --step-ms 200
  sbatch: [--partition=low, --ntasks=1, --dl-grace=30s, --dl-max-restarts=0$1]
hyperparameters:
  lr: {type: log, minval: 0.001, maxval: 1.0}
searcher:
  name: asha
  asha_mode: stopping
  metric: loss
  budget: 32
  max_rungs: 3
  max_trials: 1
  max_concurrent_trials: 1
  max_restarts: 0
EOF
  export DL_SEARCH_WAIT=30
  dl-search submit cont.yaml 2>driver.txt &
  echo $! >driver.pid
  wait_until 60 'reached t001 18' || { cat driver.txt; false; }
  job_of t001 >job.txt
  grep -q "t001: job $(cat job.txt) continues (to rung 2, 32 steps" driver.txt
}

# The end of one_trial_at_rung2's search, its job $1 run again once: one job, rungs 0 to 2
# in it, every step 0..31 once, the second run resumed from its checkpoint in rung 2.
check_rung2_resumed() {
  local job=$1
  wait "$(cat driver.pid)"
  rm driver.pid
  cat driver.txt
  grep -q "search '$EXP' complete; best trial t001" driver.txt
  [ "$(job_field "$job" Restarts)" = 1 ]
  [ "$(squeue -h --states=all --me -o %j | grep -c "^dls\.$EXP\.t001\.")" = 1 ]
  dl-search status "$EXP" --json | check_json '
t1 = [o for o in d["operations"] if o["trial"] == "t001" and o["kind"] in ("create", "resume")]
assert [(o["rung"], o["continued"]) for o in t1] == [(0, False), (1, True), (2, True)], t1
t = d["trials"][0]
assert t["state"] == "completed" and sorted(t["rung_values"]) == ["0", "1", "2"], t'
  dl-exp metrics "$EXP" --json | check_json '
s = sorted(m["step"] for m in d["metrics"] if m["name"] == "loss")
assert s == list(range(32)), s'
  dl-exp show "$EXP" --json | check_json '
ev = [e for e in d["events"] if e["kind"] == "run_started"]
assert len(ev) == 2 and ev[1]["reason"].startswith("resumed from "), ev
ck = {c["path"]: c["step"] for t in d["trials"] for c in t["checkpoints"]}
assert 16 <= ck[ev[1]["reason"][len("resumed from "):]] < 31, (ev, ck)'
  grep -q "budget 32 .* resumed from" "$DL_EXP_ROOT/$EXP/logs/t001.$job.out"
}

# search 13: a trial paused while it continues in its job is requeued held, resumed, and goes on
# from its checkpoint at its rung (the decisions of its job)
@test "search 13: paused while continuing in its job" {
  # Paused at rung 2 (dlrun's checkpoint, requeued held), resumed: the same job, requeued
  # with the first rung's DL_MAX_STEPS, finds rung 2's budget through its decisions.
  one_trial_at_rung2
  job=$(cat job.txt)
  dl-search pause "$EXP" t001
  wait_until 60 '[ "$(job_field "$job" JobState)" = PENDING ] && [ "$(job_field "$job" Reason)" = job_requeued_in_held_state ]' ||
    { cat driver.txt; scontrol show job "$job"; false; }
  wait_until 30 "grep -q 't001: job $job held; its slot is free' driver.txt"
  dl-search resume "$EXP" t001
  check_rung2_resumed "$job"
}

# search 14: a rung's value ranks once its trial is told to end, not once its job has left: a trial
# ending that rung meanwhile is promoted in its job
@test "search 14: a rung's value ranks once told to end" {
  # Two trials at once, lr 0.1 (better) or 0.001 (worse). The worse one runs fast and its
  # job stays 20 s after its rung; the better one ends rung 0 meanwhile, with the worse
  # one's value ranked already: the top of 2, it continues in its job. (Before, the worse
  # one's value counted only once its job had left: the better one, alone at its rung,
  # was not promoted in its job.)
  cat >trial.sh <<'EOF'
#!/bin/bash
if python3 -c 'import json, os, sys; sys.exit(json.loads(os.environ["DL_HPARAMS"])["lr"] < 0.01)'; then
  ms=1500 linger=0
else
  ms=20 linger=20
fi
srun --mpi=pmix dlrun /usr/bin/python3 "$DL_ROOT/examples/search_trainer.py" --step-ms "$ms"
sleep "$linger"
EOF
  cat >rank.yaml <<EOF
name: $EXP
trial:
  command: DL_ROOT=$DL_ROOT bash $PWD/trial.sh
  sbatch: [--ntasks=1]
hyperparameters:
  lr: {type: categorical, values: [0.1, 0.001]}
searcher:
  name: asha
  metric: loss
  budget: 8
  max_rungs: 3
  max_trials: 2
  max_concurrent_trials: 2
  seed: 3
EOF
  export DL_SEARCH_WAIT=30
  run dl-search submit rank.yaml
  echo "$output"
  [ "$status" -eq 0 ]
  check_search "$EXP"
  checks search ranked_promotion
  [[ $output == *": rung 0 done, loss="*"; its job ends"* ]]
}

# search 15: a trial preempted by a high job while it continues in its job is requeued by Slurm and
# goes on from its checkpoint at its rung, counted once
@test "search 15: preempted while continuing in its job" {
  one_trial_at_rung2 ", --dl-preemptible"
  job=$(cat job.txt)
  # Every node, whole: the trial's job is preempted (requeued), then runs again.
  high=$(submit -p high -N4 --exclusive -o high.txt --wrap 'sleep 2')
  wait_state "$high" COMPLETED 120
  check_rung2_resumed "$job"
}
