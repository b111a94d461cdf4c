#!/usr/bin/env bats
# Experiment tracking (issue 14): jobs run with --dl-experiment are trials of the
# experiment; every metric their rank 0 reports, every checkpoint and every event of
# their runs (also across a preemption and a resume) arrives exactly once in `dl-exp`,
# from many writers on many nodes at once; sqlite3 opens the store.

load helpers

setup_file() {
  export DLRUN=$DL_BUILD_DIR/launcher/dlrun
  export DP=$DL_BUILD_DIR/examples/dp_trainer
  export EXAMPLES=$DL_ROOT/examples
  export DLEXP=$DL_BUILD_DIR/exp/dl-exp
}

setup() {
  cd "$BATS_TEST_TMPDIR"
  export DL_EXP_ROOT=$BATS_TEST_TMPDIR/experiments
}

teardown() {
  show_on_failure out.txt arr-*.txt py.txt
  cancel_all
  if [ -f serve.pid ]; then kill "$(cat serve.pid)" 2>/dev/null || true; fi
  if [ -f shared.path ]; then rm -rf "$(cat shared.path)"; fi
}

submit_dp() {
  submit --export="ALL,DP_TRAINER=$DP,PATH=$DL_BUILD_DIR/launcher:$PATH" -o out.txt \
    --open-mode=append "$@"
}
last_step() { grep -o '\] step [0-9]* loss' out.txt | tail -n 1 | awk '{print $3}'; }

# A journal of hand-made records ($3..., JSON objects without seq) in experiment $2 of
# root $1, framed as the writers frame them (CRC-32, as zlib.crc32, then the JSON).
write_journal() {
  local root=$1 exp=$2
  shift 2
  mkdir -p "$root/$exp/journals"
  /usr/bin/python3 -c '
import json, sys, zlib
with open(sys.argv[1], "w") as f:
    for seq, text in enumerate(sys.argv[2:]):
        r = json.loads(text); r["seq"] = seq
        body = json.dumps(r)
        f.write("%08x %s\n" % (zlib.crc32(body.encode()), body))' "$root/$exp/journals/w1.jsonl" "$@"
}

# jq-free JSON checks: python3 reads dl-exp's output from stdin and runs the code in $1.
check_json() { python3 -c "import json, sys; d = json.load(sys.stdin); $1"; }

# exp 1: a preempted and resumed trial: every metric, checkpoint and event exactly once
# bats test_tags=stacks
@test "exp 1: preempted trial: every record exactly once" {
  # Periodic checkpoints too: a preemption may end the run after steps past its last
  # checkpoint were reported, and the next run reports them again.
  job=$(submit_dp -J "exp-preempt-$$" -p low --dl-grace=30s --dl-ckpt-every=3s \
    --dl-experiment=pre --dl-trial=t1 \
    "$EXAMPLES/dp_trainer.sbatch" --steps 200 --step-ms 50 --out "$PWD/out.bin")
  wait_until 90 '[ "$(last_step)" -ge 40 ]'
  # Merged while the job runs: the trial is running.
  "$DLEXP" show pre --json | check_json '
t = d["trials"][0]; assert t["id"] == "t1" and t["state"] == "running", t'
  high=$(submit -p high -N4 --exclusive -o high.txt --wrap 'sleep 2')
  wait_state "$high" COMPLETED 120
  wait_state "$job" COMPLETED 180
  [ "$(job_field "$job" Restarts)" = 1 ]

  "$DLEXP" show pre --json >show.json
  "$DLEXP" metrics pre t1 --json >metrics.json
  check_json '
t = d["trials"]
assert [x["id"] for x in t] == ["t1"], t
t = t[0]
assert t["state"] == "completed" and t["restarts"] == 1 and t["job_id"] == "'"$job"'", t
kinds = [e["kind"] for e in d["events"]]
assert kinds.count("run_started") == 2 and kinds.count("requeued") == 1, kinds
assert kinds.count("completed") == 1 and kinds[-1] == "completed", kinds
assert "stop_requested" in kinds, kinds
assert [e["restarts"] for e in d["events"] if e["kind"] == "run_started"] == [0, 1], d["events"]
steps = [c["step"] for c in t["checkpoints"]]
assert steps and len(steps) == len(set(steps)), steps
resumed = [e["reason"] for e in d["events"] if e["kind"] == "run_started"][1]
assert any(c["verified"] and resumed == "resumed from " + c["path"] for c in t["checkpoints"]), (resumed, t["checkpoints"])
' <show.json
  # dp_trainer reports loss every 10 steps: each of them once, across both runs.
  check_json '
steps = [m["step"] for m in d["metrics"] if m["name"] == "loss"]
assert steps == list(range(0, 200, 10)), steps
' <metrics.json
  # The store is a plain SQLite file; re-merging (every dl-exp call) adds nothing.
  "$DLEXP" show pre >/dev/null
  db=$DL_EXP_ROOT/pre/experiment.db
  [ "$(sqlite3 "$db" 'SELECT count(*) FROM metrics WHERE NOT superseded')" = 20 ]
  [ "$(sqlite3 "$db" "SELECT count(*) FROM events WHERE kind = 'run_started'")" = 2 ]
  [ "$(sqlite3 "$db" 'SELECT state FROM trials')" = completed ]
  # The tables and the best trial.
  run "$DLEXP" show pre
  [[ $output == *"TRIAL"*"STATE"* && $output == *"t1"*"completed"* ]]
  run "$DLEXP" best pre --metric loss --json
  [ "$status" -eq 0 ]
  [[ $output == *'"trial": "t1"'* ]]
}

# exp 2: concurrent writers from several jobs on several nodes, C++ and Python
@test "exp 2: concurrent writers, C++ and Python" {
  # Four array tasks (trials <array>_<task>), two nodes each, all at once, and a Python
  # program: ten writers appending to one experiment's journals concurrently.
  arr=$(submit --export="ALL" -p low --array=0-3 -N2 --ntasks-per-node=1 -o "arr-%a.txt" \
    --dl-experiment=conc --wrap "srun --mpi=pmix $DLRUN $DP --steps 100 --step-ms 10 --out $PWD/out-\$SLURM_ARRAY_TASK_ID.bin")
  py=$(submit --export="ALL,PYTHONPATH=$DL_ROOT/python" -N1 -o py.txt --dl-experiment=conc \
    --dl-trial=py --wrap "srun --mpi=pmix $DLRUN python3 -c 'import slurm_dl
for s in range(300): slurm_dl.report_metrics(s, {\"x\": s / 7, \"y\": 1.0})'")
  for t in 0 1 2 3; do wait_state "${arr}_$t" COMPLETED 120; done
  wait_state "$py" COMPLETED 120
  "$DLEXP" show conc --json | check_json '
ids = sorted(t["id"] for t in d["trials"])
assert ids == sorted(["'"$arr"'_%d" % i for i in range(4)] + ["py"]), ids
assert all(t["state"] == "completed" for t in d["trials"]), d["trials"]'
  "$DLEXP" metrics conc --json | check_json '
from collections import Counter
c = Counter((m["trial"], m["name"], m["step"]) for m in d["metrics"])
assert max(c.values()) == 1, c.most_common(3)
for i in range(4):
    assert sorted(s for (t, n, s) in c if t == "'"$arr"'_%d" % i) == list(range(0, 100, 10)), i
x = sorted((s, v) for (t, n, s) in c for v in [0] if t == "py" and n == "x")
assert [s for s, _ in x] == list(range(300)), x[:5]
py = [m for m in d["metrics"] if m["trial"] == "py" and m["name"] == "x"]
assert all(abs(m["value"] - m["step"] / 7) < 1e-12 for m in py)'
  # One journal per writer: per run a dlrun journal and a metrics journal (rank 0 only).
  [ "$(ls "$DL_EXP_ROOT/conc/journals" | grep -c '^run-')" = 5 ]
  [ "$(ls "$DL_EXP_ROOT/conc/journals" | grep -c '^metrics-')" = 5 ]
  [ "$(stat -c %a "$DL_EXP_ROOT/conc/journals")" = 700 ]
}

# exp 3: dl-exp names an unknown experiment or trial; list, logs and export; --json refused by
# export
@test "exp 3: dl-exp list, logs, export and its errors" {
  job=$(submit -N1 --dl-experiment=small --dl-trial=only -o out.txt \
    --wrap "srun --mpi=pmix $DLRUN $DP --steps 30 --step-ms 0 --out $PWD/out.bin")
  wait_state "$job" COMPLETED 60
  run "$DLEXP" show nosuch
  [ "$status" -eq 2 ]
  [[ $output == *"unknown experiment 'nosuch'"* ]]
  run "$DLEXP" metrics small nosuch
  [ "$status" -eq 2 ]
  [[ $output == *"unknown trial 'nosuch' in experiment 'small' (trials: only)"* ]]
  "$DLEXP" list --json | check_json '
e = d["experiments"]; assert [x["id"] for x in e] == ["small"] and e[0]["trials"] == 1, e'
  # The trial's log: the batch job's output file, shown by `dl-exp logs`.
  "$DLEXP" logs small only --json | check_json '
assert [l["path"] for l in d["logs"]] == ["'"$PWD"'/out.txt"], d["logs"]'
  run "$DLEXP" logs small only
  [[ $output == *"==> $PWD/out.txt <=="*"final step"* ]]
  "$DLEXP" export small --format csv -o csv
  "$DLEXP" export small --format json -o json
  # --json is for the commands that print tables: export refuses it, writing nothing.
  run "$DLEXP" --json export small --format csv -o csv2
  [ "$status" -eq 2 ]
  [[ $output == *"--json: export, plot and serve write files or a page"* ]]
  [ ! -e csv2 ]
  python3 -c '
import csv, json
rows = list(csv.DictReader(open("csv/metrics.csv")))
assert [int(r["step"]) for r in rows] == [0, 10, 20], rows
assert list(csv.DictReader(open("csv/trials.csv")))[0]["state"] == "completed"
d = json.load(open("json/small.json"))
assert len(d["metrics"]) == 3 and d["trials"][0]["id"] == "only"'
  # TensorBoard event files, read back with protoc + python3-protobuf and crcmod's CRC-32C.
  "$DLEXP" export small --format tensorboard -o tb
  protoc -I"$DL_ROOT/tests/integration" --python_out=. "$DL_ROOT/tests/integration/exp_event.proto"
  /usr/bin/python3 -c '
import glob, json, struct, crcmod.predefined, exp_event_pb2
crc = crcmod.predefined.mkCrcFun("crc-32c")
mask = lambda b: ((((crc(b) >> 15) | (crc(b) << 17)) & 0xffffffff) + 0xa282ead8) & 0xffffffff
files = glob.glob("tb/only/events.out.tfevents.*")
assert len(files) == 1, files
data, events = open(files[0], "rb").read(), []
while data:
    (n,), (lc,) = struct.unpack("<Q", data[:8]), struct.unpack("<I", data[8:12])
    body, (dc,) = data[12:12 + n], struct.unpack("<I", data[12 + n:16 + n])
    assert lc == mask(data[:8]) and dc == mask(body)
    e = exp_event_pb2.Event(); e.ParseFromString(body); events.append(e)
    data = data[16 + n:]
assert events[0].file_version == "brain.Event:2"
got = [(e.step, v.tag, v.simple_value) for e in events[1:] for v in e.summary.value]
want = [(m["step"], m["name"], m["value"]) for m in json.load(open("json/small.json"))["metrics"]]
assert [g[:2] for g in got] == [w[:2] for w in want] == [(0, "loss"), (10, "loss"), (20, "loss")], got
assert all(abs(g[2] - w[2]) <= 1e-6 * abs(w[2]) for g, w in zip(got, want)), (got, want)'
}

# exp 4: dl-exp plot draws each trial's curve with gnuplot, as PNG and SVG
@test "exp 4: dl-exp plot as PNG and SVG" {
  for t in a b; do
    job=$(submit -N1 --dl-experiment=plots --dl-trial=$t -o "out-$t.txt" \
      --wrap "srun --mpi=pmix $DLRUN $DP --steps 50 --step-ms 0 --out $PWD/out-$t.bin")
    wait_state "$job" COMPLETED 60
  done
  "$DLEXP" plot plots -o curves.png
  "$DLEXP" plot plots --metric loss -o curves.svg
  python3 -c '
import struct, zlib, xml.etree.ElementTree as ET
png = open("curves.png", "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n", png[:8]
w, h = struct.unpack(">II", png[16:24]); assert (w, h) == (900, 600), (w, h)
idat, pos = b"", 8
while pos < len(png):
    n, kind = struct.unpack(">I4s", png[pos:pos + 8]); pos += 8
    if kind == b"IDAT": idat += png[pos:pos + n]
    pos += n + 4
assert len(set(zlib.decompress(idat))) > 4  # drawn, not one flat colour
svg = ET.parse("curves.svg").getroot()
text = " ".join("".join(e.itertext()) for e in svg.iter() if e.tag.endswith("text"))
assert "plots: loss per trial" in text and "a" in text.split() and "b" in text.split(), text
assert sum(1 for e in svg.iter() if e.tag.endswith("path")) >= 2'
  run "$DLEXP" plot plots --metric acc -o x.png
  [ "$status" -eq 2 ]
  [[ $output == *"--metric=acc: not reported in experiment 'plots' (metrics: loss)"* ]]
  run "$DLEXP" plot plots -o x.jpg
  [ "$status" -eq 2 ]
  [[ $output == *"-o x.jpg: expected a file name ending in .png or .svg"* ]]
}

# exp 5: show --follow shows the trial live and ends when it has ended
@test "exp 5: show --follow ends with the trial" {
  job=$(submit -N1 --dl-experiment=live --dl-trial=t -o out.txt \
    --wrap "srun --mpi=pmix $DLRUN $DP --steps 150 --step-ms 50 --out $PWD/out.bin")
  wait_until 60 '"$DLEXP" show live --json >/dev/null 2>&1'
  timeout 90 "$DLEXP" show live --follow --json --interval 0.5 >follow.txt
  wait_state "$job" COMPLETED 30
  python3 -c '
import json
shots = [json.loads(l)["trials"] for l in open("follow.txt")]
assert shots[0][0]["state"] == "running" and shots[-1][0]["state"] == "completed", shots
steps = [s[0]["step"] for s in shots if s[0]["step"] is not None]
assert len(set(steps)) >= 3 and steps == sorted(steps), steps'
}

# exp 6: dl-exp serve: headless Chromium shows the trials dl-exp --json shows, with curves
@test "exp 6: dl-exp serve in headless Chromium" {
  command -v chromium >/dev/null || skip "no browser on this stack (docs/compatibility.md)"
  for t in a b; do
    job=$(submit -N1 --dl-experiment=web --dl-trial=$t -o "out-$t.txt" \
      --wrap "srun --mpi=pmix $DLRUN $DP --steps 40 --step-ms 0 --out $PWD/out-$t.bin")
    wait_state "$job" COMPLETED 60
  done
  port=$((${DL_MINICLUSTER_PORT_BASE:-6800} + 90))
  "$DLEXP" serve --port "$port" 2>serve.txt 3>&- &
  echo $! >serve.pid
  # The URL it prints carries the token that every request needs (the browser gets a
  # cookie from the first page).
  wait_until 20 "grep -q 'serving http' serve.txt"
  token=$(grep -o 'token=[0-9a-f]*' serve.txt | cut -d= -f2)
  wait_until 20 "curl -sf http://127.0.0.1:$port/api/experiments?token=$token >/dev/null"
  # Bound to the loopback address only, by default.
  ss -ltnH "sport = :$port" | awk '{print $4}' | grep -qx "127.0.0.1:$port"
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/api/show/nosuch?token=$token")" = 404 ]
  url="http://127.0.0.1:$port/?exp=web&token=$token"
  chrome=(timeout 60 chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=5000)
  "${chrome[@]}" --dump-dom "$url" 2>/dev/null >dom.html
  "${chrome[@]}" --window-size=1200,900 --screenshot="$PWD/shot.png" "$url" 2>/dev/null
  "$DLEXP" show web --json >show.json
  # The page's trials and states are dl-exp's.
  /usr/bin/python3 -c '
import json, re
page = re.findall(r"<tr data-trial=\"([^\"$]*)\" data-state=\"([^\"$]*)\"", open("dom.html").read())
want = [(t["id"], t["state"]) for t in json.load(open("show.json"))["trials"]]
assert sorted(page) == sorted(want) == [("a", "completed"), ("b", "completed")], (page, want)
assert len(re.findall(r"<polyline fill=\"none\" stroke=\"#", open("dom.html").read())) == 2
from PIL import Image
img = Image.open("shot.png").convert("RGB")
assert img.size == (1200, 900), img.size
px = list(img.getdata())
ink = sum(1 for p in px if p != (255, 255, 255))
coloured = sum(1 for (r, g, b) in px if max(r, g, b) - min(r, g, b) > 60)
assert ink > 0.01 * len(px) and coloured > 200, (ink, coloured)'
}

# exp 7: dlother's private and trap experiments in a shared root: dltest's list still works
@test "exp 7: others' experiments do not break list" {
  shared=$(mktemp -d /tmp/dl-exp-shared.XXXXXX)
  echo "$shared" >shared.path
  chmod 1777 "$shared"
  metric='{"kind": "metrics", "trial": "t1", "step": 0, "time": 1, "values": {"loss": 0.5}}'
  as_dltest bash -c "$(declare -f write_journal); umask 077; write_journal $shared mine '$metric'"
  # dlother: an experiment nobody else may read, and one open to all whose journals are
  # a FIFO (a reader that opens it waits forever) and a sparse 64 GiB file.
  runuser -u dlother -- bash -c "$(declare -f write_journal); umask 077
    write_journal $shared private '$metric'
    mkdir -m 0777 -p $shared/trap/journals && chmod 0777 $shared/trap
    mkfifo -m 0666 $shared/trap/journals/fifo.jsonl
    truncate -s 64G $shared/trap/journals/huge.jsonl && chmod 0666 $shared/trap/journals/huge.jsonl"
  # 4 GB of address space: a reader that allocates a journal whole fails.
  run as_dltest env DL_EXP_ROOT="$shared" timeout 30 bash -c \
    "ulimit -v 4000000; exec $DLEXP list --json 2>/dev/null"
  echo "$output"
  [ "$status" -eq 0 ]
  check_json 'assert [e["id"] for e in d["experiments"]] == ["mine"], d' <<<"$output"
  run as_dltest env DL_EXP_ROOT="$shared" timeout 30 "$DLEXP" list
  [ "$status" -eq 0 ]
  [[ $output == *mine* ]]
  [ "$(grep -c "skipped" <<<"$output")" -eq 1 ]
  [[ $output == *"skipped 2 experiments under $shared that are not yours or not readable: private, trap"* ]]
  # Naming another user's experiment is a clear error, not a crash or a hang.
  run as_dltest env DL_EXP_ROOT="$shared" timeout 30 "$DLEXP" show trap
  [ "$status" -eq 2 ]
  [[ $output == *"experiment 'trap' under $shared belongs to dlother"* ]]
}

# exp 8: a FIFO, a link and a sparse 64 GiB journal of one's own are skipped or read in bounded
# pieces
@test "exp 8: FIFO, link, sparse journals are bounded" {
  metric='{"kind": "metrics", "trial": "t1", "step": 0, "time": 1, "values": {"loss": 0.5}}'
  write_journal "$DL_EXP_ROOT" own "$metric"
  mkfifo "$DL_EXP_ROOT/own/journals/fifo.jsonl"
  ln -s /etc/passwd "$DL_EXP_ROOT/own/journals/link.jsonl"
  truncate -s 64G "$DL_EXP_ROOT/own/journals/huge.jsonl"
  # 4 GB of address space: a reader that allocates the journal whole fails.
  run timeout 120 bash -c "ulimit -v 4000000; exec $DLEXP metrics own --json"
  echo "$output"
  [ "$status" -eq 0 ]
  check_json 'assert [(m["trial"], m["value"]) for m in d["metrics"]] == [("t1", 0.5)], d' \
    < <(grep -v '^dl-exp:' <<<"$output")
  [[ $output == *"dl-exp: skipped "*"fifo.jsonl: not a regular file"* ]]
  [[ $output == *"dl-exp: skipped "*"link.jsonl"* ]]
}

# exp 9: control characters in journal strings are escaped; a trial name is checked before it is a
# path
@test "exp 9: control characters escaped, names checked" {
  write_journal "$DL_EXP_ROOT" esc \
    '{"kind": "metrics", "trial": "a\u001b]0;owned\u0007b", "step": 0, "time": 1, "values": {"l\u001b[2Jx": 1}}' \
    '{"kind": "event", "event": "failed", "trial": "a\u001b]0;owned\u0007b", "time": 2, "reason": "bad\r\u001b[31mred"}' \
    '{"kind": "metrics", "trial": "../../outside", "step": 0, "time": 1, "values": {"loss": 1}}'
  for cmd in "show esc" "metrics esc" list; do
    run "$DLEXP" $cmd
    [ "$status" -eq 0 ]
    ! LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' <<<"$output" || false
  done
  run "$DLEXP" show esc
  [[ $output == *'a\x1b]0;owned\x07b'* ]]
  [[ $output == *'bad\r\x1b[31mred'* ]]
  run "$DLEXP" metrics esc
  [[ $output == *'l\x1b[2Jx'* ]]
  mkdir -p deep/er
  cd deep/er
  run "$DLEXP" export esc --format tensorboard -o tb
  [ "$status" -eq 2 ]
  [[ $output == *"trial '../../outside': expected 1 to 128 letters, digits or _.- not starting with '.'"* ]]
  [ ! -e ../../outside ] && [ ! -e ../outside ] && [ ! -e tb/../../outside ]
}

# exp 10: dl-exp serve answers only with its token and only to the host names it serves
@test "exp 10: serve needs its token and its host names" {
  write_journal "$DL_EXP_ROOT" web \
    '{"kind": "metrics", "trial": "t1", "step": 0, "time": 1, "values": {"loss": 0.5}}'
  port=$((${DL_MINICLUSTER_PORT_BASE:-6800} + 92))
  "$DLEXP" serve --port "$port" 2>serve.txt 3>&- &
  echo $! >serve.pid
  wait_until 20 "grep -q 'serving http' serve.txt"
  url=$(grep -o 'http://[^ ]*' serve.txt)
  token=${url##*token=}
  [ "${#token}" -ge 32 ]
  [ "$url" = "http://127.0.0.1:$port/?token=$token" ]
  base=http://127.0.0.1:$port
  code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
  # Without the token: refused, the page and the API alike; a wrong token too.
  [ "$(code "$base/")" = 403 ]
  [ "$(code "$base/api/experiments")" = 403 ]
  [ "$(code "$base/api/show/web")" = 403 ]
  [ "$(code "$base/api/experiments?token=${token}x")" = 403 ]
  [ "$(code -H "Cookie: dl-exp-token-$port=nope" "$base/api/experiments")" = 403 ]
  # With it (query, cookie, or header), answered.
  [ "$(code "$base/api/experiments?token=$token")" = 200 ]
  curl -sf "$base/api/show/web?token=$token" | check_json 'assert d["trials"][0]["id"] == "t1", d'
  [ "$(code -H "Authorization: token $token" "$base/api/experiments")" = 200 ]
  # The page with the token sets a cookie that the page's own requests carry.
  curl -s -D headers.txt -o /dev/null "$base/?token=$token"
  grep -i "^set-cookie: dl-exp-token-$port=$token;.*HttpOnly" headers.txt
  [ "$(code -H "Cookie: dl-exp-token-$port=$token" "$base/api/experiments")" = 200 ]
  # A name that is not this host's (DNS rebinding: evil.example resolves to 127.0.0.1).
  [ "$(code -H "Host: evil.example:$port" "$base/api/experiments?token=$token")" = 403 ]
  [ "$(code -H "Host: localhost:$port" "$base/api/experiments?token=$token")" = 200 ]
}

# exp 11: an experiments root that dlother made is refused, naming it and its owner
@test "exp 11: another user's experiments root refused" {
  # dlother made the shared root, like /tmp: as its owner it could rename dltest's
  # experiment and put a directory of its own in its place.
  shared=$(mktemp -d /tmp/dl-exp-squat.XXXXXX)
  echo "$shared" >shared.path
  chown dlother: "$shared"
  chmod 1777 "$shared"
  why="$shared belongs to dlother (uid $(id -u dlother)), neither root nor dltest (uid $(id -u dltest)): its owner could replace what lies below it; refusing to use it as a root"
  cd /home/dltest
  run as_dltest env DL_EXP_ROOT="$shared" srun -N1 --mpi=pmix --dl-experiment=squat "$DLRUN" true
  [ "$status" -eq 0 ]
  [[ $output == *"experiment tracking: $why"*"this run is not tracked"* ]]
  [ -z "$(ls -A "$shared")" ]
  runuser -u dltest -- mkdir -m 0700 -p "$shared/mine/journals"
  for cmd in list "show mine"; do
    run as_dltest env DL_EXP_ROOT="$shared" timeout 30 "$DLEXP" $cmd
    [ "$status" -eq 2 ]
    [ "$output" = "dl-exp: $why (an administrator must remove it or chown it to root)" ]
  done
  [ "$(ls -A "$shared")" = mine ]
  [ "$(ls -A "$shared/mine")" = journals ]
}
