#!/usr/bin/env bats
# Checkpoints: files standard tools read bit for bit, the dl-ckpt tool, a multi-rank save
# on the cluster read back by another world size, and real faults: a full filesystem, an
# unwritable directory, files that are not checkpoints, and writers killed with SIGKILL.

load helpers

writer=$DL_BUILD_DIR/tests/integration/ckpt_writer
dlckpt=$DL_BUILD_DIR/ckpt/dl-ckpt
# Debian's Python, which has h5py (the python3 on PATH may not).
py=/usr/bin/python3

setup() { cd "$BATS_TEST_TMPDIR"; }

teardown() {
  cancel_all
  if [ -n "${small:-}" ] && mountpoint -q "$small"; then umount "$small"; fi
  if [ -n "${shared:-}" ]; then rm -rf "$shared"; fi
}

# The tensors ckpt_writer saves, with the numpy dtype h5py reads them as.
tensors_py='{"model/f16": "float16", "model/bf16": "uint16", "model/f32": "float32",
  "model/f64": "float64", "model/i32": "int32", "step_count": "int64", "data/u8": "uint8",
  "empty": "float32"}'

# bats test_tags=stacks
@test "ckpt: h5py and h5dump read a checkpoint's tensors bit for bit" {
  run "$writer" save --dir ck --step 1200 --dump dump
  [ "$status" -eq 0 ]
  shard=ck/step-000001200/shard-00000-of-00001.h5
  run "$py" - "$shard" dump "$tensors_py" <<'EOF'
import json, os, sys
import h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
assert f.attrs["dl_format"] == "dl-ckpt" and f.attrs["format_version"] == 1
assert f.attrs["step"] == 1200 and f.attrs["world_size"] == 1 and f.attrs["rank"] == 0
assert json.loads(f.attrs["hyperparameters"]) == {"lr": 0.001, "batch": 32}
for name, dtype in json.loads(sys.argv[3]).items():
    d = f["tensors/" + name]
    a = d[()]
    assert a.dtype == np.dtype(dtype), (name, a.dtype)
    want = open(os.path.join(sys.argv[2], name.replace("/", "_") + ".bin"), "rb").read()
    assert a.tobytes() == want, name
    assert list(d.attrs["global_shape"]) == list(a.shape), name
    assert d.attrs["dtype"] == {"float16": "f16", "uint16": "bf16", "float32": "f32",
        "float64": "f64", "int32": "i32", "int64": "i64", "uint8": "u8"}[dtype], name
assert f["rng/xorshift"].shape == (64,)
# bf16 is the upper half of a float32: widen it to compare values, not just bits.
bf16 = f["tensors/model/bf16"][()]
widened = (bf16.astype(np.uint32) << 16).view(np.float32)
assert widened.shape == (64, 33)
print("h5py ok")
EOF
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$output" = "h5py ok" ]
  h5dump -H "$shard" >header.txt
  grep -q 'DATASET "bf16"' header.txt
  grep -q 'H5T_STD_U16LE' header.txt
  for name in model/bf16 model/f32 model/i32 data/u8; do
    h5dump -d "/tensors/$name" -b LE -o "h5dump.bin" "$shard" >/dev/null
    cmp h5dump.bin "dump/${name//\//_}.bin"
  done
}

# ckpt: dl-ckpt ls and show name the job and user that wrote a checkpoint
@test "ckpt: dl-ckpt ls and show name the writer" {
  SLURM_JOB_ID=4712 SLURM_ARRAY_JOB_ID=4700 SLURM_ARRAY_TASK_ID=3 \
    "$writer" save --dir ck --step 100 >/dev/null
  env -u SLURM_JOB_ID -u SLURM_ARRAY_JOB_ID -u SLURM_ARRAY_TASK_ID SLURM_JOB_ID=4711 \
    "$writer" save --dir ck --step 200 >/dev/null
  run "$dlckpt" ls ck
  echo "$output"
  [ "$status" -eq 0 ]
  echo "$output" | grep -q '^STEP .* WRITER '
  echo "$output" | grep -Eq "^step-000000100 .* 4700_3 $(id -un) "
  echo "$output" | grep -Eq "^step-000000200\* .* 4711 $(id -un) "
  run "$dlckpt" ls ck --json
  echo "$output" | "$py" -c '
import json, sys
c = json.load(sys.stdin)["checkpoints"]
assert c[0]["writer"]["job"] == "4700_3" and c[0]["writer"]["array_task_id"] == "3", c[0]
assert c[1]["writer"]["job"] == "4711" and c[1]["writer"]["uid"] == '"$(id -u)"', c[1]'
  run "$dlckpt" show ck
  echo "$output" | grep -qx "written by   job 4711 (user $(id -un), uid $(id -u))"
  run "$dlckpt" show ck/step-000000100 --json
  echo "$output" | "$py" -c '
import json, sys
assert json.load(sys.stdin)["writer"]["job"] == "4700_3"'
}

@test "ckpt: dl-ckpt ls, show and verify, as tables and as JSON" {
  for step in 100 200 300; do "$writer" save --dir ck --step $step >/dev/null; done
  run "$dlckpt" ls ck
  [ "$status" -eq 0 ]
  echo "$output"
  [ "$(echo "$output" | grep -c ' ok ')" -eq 3 ]
  echo "$output" | grep -q '^step-000000300\* '
  run "$dlckpt" ls ck --json
  [ "$status" -eq 0 ]
  echo "$output" | "$py" -c '
import json, sys
j = json.load(sys.stdin)
c = j["checkpoints"]
assert [x["step"] for x in c] == [100, 200, 300], c
assert all(x["valid"] for x in c) and [x["latest"] for x in c] == [False, False, True]
assert c[0]["world_size"] == 1 and c[0]["tensors"] == 8 and c[0]["metrics"]["loss"] > 0'

  run "$dlckpt" show ck
  [ "$status" -eq 0 ]
  echo "$output"
  echo "$output" | grep -q '^step  *300$'
  echo "$output" | grep -Eq '^model/bf16 +bf16 +\[64, 33\]'
  echo "$output" | grep -Eq '^0 +shard-00000-of-00001.h5 .* xorshift$'
  run "$dlckpt" show ck/step-000000100 --json
  [ "$status" -eq 0 ]
  echo "$output" | "$py" -c '
import json, sys
j = json.load(sys.stdin)
assert j["step"] == 100 and j["epoch"] == 10 and j["data_loader_position"] == 3200, j
assert j["hyperparameters"] == {"lr": 0.001, "batch": 32}
t = {x["name"]: x for x in j["tensors"]}
assert t["model/i32"]["shape"] == [5, 6, 7] and t["model/i32"]["dtype"] == "i32"
assert j["shards"][0]["rng"][0]["name"] == "xorshift"'

  run "$dlckpt" verify ck
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "3 valid, 0 invalid" ]
  run "$dlckpt" verify ck/step-000000200 --json
  [ "$status" -eq 0 ]
  echo "$output" | "$py" -c '
import json, sys
j = json.load(sys.stdin)
assert j["valid"] == 1 and j["invalid"] == 0 and j["checkpoints"][0]["step"] == 200'
}

@test "ckpt: dl-ckpt prune keeps the newest N and the best K" {
  for step in 1 2 3 4 5; do "$writer" save --dir ck --step $step >/dev/null; done
  # The writer's loss falls with the step: with --max the best is step 1.
  run "$dlckpt" prune ck --keep 2 --keep-best 1 --metric loss --max --dry-run --json
  [ "$status" -eq 0 ]
  echo "$output" | "$py" -c '
import json, sys
j = json.load(sys.stdin)
assert j["dry_run"] and [p.rsplit("/", 1)[1] for p in j["removed"]] == ["step-000000002", "step-000000003"], j'
  [ "$(ls ck | grep -c step-)" -eq 5 ]
  run "$dlckpt" prune ck --keep 2 --keep-best 1 --metric loss --max
  [ "$status" -eq 0 ]
  [ "$(ls ck | tr '\n' ' ')" = "latest step-000000001 step-000000004 step-000000005 " ]
  run "$dlckpt" prune ck --keep 0
  [ "$status" -eq 2 ]
  [ "$output" = "dl-ckpt: --keep must be at least 1" ]
}

# ckpt: 3 ranks save on the cluster, 2 ranks load it back, export is whole
@test "ckpt: 3 ranks save, 2 load, export is whole" {
  shared=$(mktemp -d /tmp/dl-ckpt-srun.XXXXXX)
  chmod 755 "$shared"
  run run_srun -N3 -n3 "$writer" save --dir "$shared/ck" --step 7
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(ls "$shared/ck/step-000000007" | tr '\n' ' ')" = \
    "manifest.json shard-00000-of-00003.h5 shard-00001-of-00003.h5 shard-00002-of-00003.h5 " ]
  run "$dlckpt" verify "$shared/ck"
  [ "$status" -eq 0 ]

  # Elastic resume: another world size reads its rows from whichever shards hold them.
  run run_srun -N2 -n2 "$writer" load --dir "$shared/ck"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | grep -c '^loaded step 7 from world size 3$')" -eq 2 ]
  run "$writer" load --dir "$shared/ck" --rank 4 --world 5
  [ "$status" -eq 0 ]

  "$writer" save --dir single --step 7 --dump dump >/dev/null
  run "$dlckpt" export "$shared/ck" -o model.h5 --json
  [ "$status" -eq 0 ]
  run "$py" - model.h5 dump "$tensors_py" <<'EOF'
import json, os, sys
import h5py
f = h5py.File(sys.argv[1], "r")
assert f.attrs["world_size"] == 1 and f.attrs["step"] == 7
for name in json.loads(sys.argv[3]):
    want = open(os.path.join(sys.argv[2], name.replace("/", "_") + ".bin"), "rb").read()
    assert f["tensors/" + name][()].tobytes() == want, name
print("export ok")
EOF
  echo "$output"
  [ "$output" = "export ok" ]
}

# ckpt: ENOSPC mid-save fails cleanly and keeps the previous checkpoint
@test "ckpt: ENOSPC mid-save keeps the previous one" {
  small=$BATS_TEST_TMPDIR/small
  mkdir -p "$small"
  mount -t tmpfs -o size=8m tmpfs "$small"
  run "$writer" save --dir "$small/ck" --step 1
  [ "$status" -eq 0 ]
  # 16 MiB more state than the 8 MiB filesystem holds.
  run "$writer" save --dir "$small/ck" --step 2 --mib 16
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == *"couldn't write $small/ck/.tmp-step-000000002."*"/shard-00000-of-00001.h5.partial."*": No space left on device"* ]]
  [ "$(ls -A "$small/ck" | tr '\n' ' ')" = "latest step-000000001 " ]
  [ "$(cat "$small/ck/latest")" = "step-000000001" ]
  run "$dlckpt" verify "$small/ck"
  [ "$status" -eq 0 ]
  run "$writer" load --dir "$small/ck"
  [ "$output" = "loaded step 1 from world size 1" ]
}

# ckpt: an unwritable directory or another user's is a clear error
@test "ckpt: an unwritable directory is a clear error" {
  shared=$(mktemp -d /tmp/dl-ckpt-perm.XXXXXX)
  chmod 755 "$shared"
  mkdir "$shared/mine" "$shared/ck"
  chown dltest "$shared/mine"
  chmod 555 "$shared/mine"
  run runuser -u dltest -- "$writer" save --dir "$shared/mine" --step 1
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "ckpt_writer: checkpoint directory $shared/mine is not writable: Permission denied" ]
  run runuser -u dltest -- "$writer" save --dir "$shared/ck" --step 1
  echo "$output"
  [ "$status" -eq 1 ]
  [ "$output" = "ckpt_writer: refusing checkpoint directory $shared/ck: owned by uid 0, not by this user (uid $(id -u dltest)); its owner could replace the checkpoints in it" ]
  run runuser -u dltest -- "$writer" save --dir "$shared/ck/sub" --step 1
  [ "$status" -eq 1 ]
  [ "$output" = "ckpt_writer: couldn't create directory $shared/ck/sub: Permission denied" ]
  [ -z "$(ls -A "$shared/ck")" ]
  # Pruning someone else's checkpoints: the removal is refused, nothing changes.
  "$writer" save --dir "$shared/ck" --step 1 >/dev/null
  "$writer" save --dir "$shared/ck" --step 2 >/dev/null
  "$dlckpt" --version >/dev/null  # lets libtool's wrapper finish its set-up as root
  run runuser -u dltest -- "$dlckpt" prune "$shared/ck" --keep 1
  echo "$output"
  [ "$status" -eq 3 ]
  [[ "$output" == "dl-ckpt: couldn't rename $shared/ck/step-000000001 and "*": Permission denied" ]]
  [ "$(ls "$shared/ck" | tr '\n' ' ')" = "latest step-000000001 step-000000002 " ]
}

# ckpt: files that are not checkpoints give clear errors, never a crash
@test "ckpt: non-checkpoints give clear errors" {
  "$py" -c 'import h5py, numpy; h5py.File("plain.h5", "w")["x"] = numpy.arange(10)'
  run "$dlckpt" verify plain.h5
  [ "$status" -eq 2 ]
  [ "$output" = "dl-ckpt: plain.h5: not a checkpoint: give a checkpoint directory or one of its step-NNNNNNNNN directories, not a file" ]
  run "$dlckpt" show nowhere
  [ "$status" -eq 2 ]
  [ "$output" = "dl-ckpt: nowhere: no such file or directory" ]
  mkdir empty
  run "$dlckpt" ls empty
  [ "$status" -eq 2 ]
  [ "$output" = "dl-ckpt: empty: not a checkpoint: no manifest.json and no step-NNNNNNNNN directories" ]
  run "$dlckpt" frobnicate
  [ "$status" -eq 2 ]

  for step in 1 2 3 4; do "$writer" save --dir ck --step $step >/dev/null; done
  shard() { echo "ck/step-00000000$1/shard-00000-of-00001.h5"; }
  # A foreign HDF5 file in place of a shard; garbage of the right size; a garbage manifest.
  cp plain.h5 "$(shard 4)"
  head -c "$(stat -c %s "$(shard 3)")" /dev/urandom >garbage
  cp garbage "$(shard 3)"
  echo '{"format": "dl-ckpt", "format_version": 1, "step": ' >ck/step-000000002/manifest.json
  run "$dlckpt" verify ck/step-000000004
  echo "$output"
  [ "$status" -eq 1 ]
  [[ "$output" == "BAD   ck/step-000000004: $(shard 4): "*" bytes, the manifest says "*" (truncated)"* ]]
  run "$dlckpt" verify ck/step-000000003
  [ "$status" -eq 1 ]
  [[ "$output" == *"$(shard 3): HDF5 metadata checksum mismatch"* ]]
  run "$dlckpt" show ck/step-000000002
  [ "$status" -eq 1 ]
  [ "$output" = "dl-ckpt: ck/step-000000002/manifest.json: not valid JSON (byte 53)" ]
  run "$dlckpt" ls ck
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | grep -c ' BAD ')" -eq 3 ]
  run "$dlckpt" verify ck --json
  [ "$status" -eq 1 ]
  echo "$output" | "$py" -c 'import json, sys; j = json.load(sys.stdin); assert j["valid"] == 1 and j["invalid"] == 3'

  # The loader skips all three, saying why once each, and restores step 1.
  run "$writer" load --dir ck
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = "loaded step 1 from world size 1" ]
  [ "$(echo "$output" | grep -c 'warning: checkpoint ck/step-00000000[234] is unusable')" -eq 3 ]
}

# ckpt: kill -9 of a writer at 50 random instants never leaves a bad checkpoint visible
@test "ckpt: writer killed at 50 instants: never bad" {
  for i in $(seq 1 50); do
    "$writer" loop --dir ck --mib 4 --keep 3 >>loop.out 2>&1 &
    pid=$!
    sleep "0.$(printf '%03d' $((RANDOM % 400 + 30)))"
    kill -9 $pid
    wait $pid 2>/dev/null || true
    newest=$(ls -d ck/step-* 2>/dev/null | sort | tail -n 1)
    if [ -n "$newest" ]; then
      run "$dlckpt" verify "$newest"
      [ "$status" -eq 0 ] || { echo "after kill $i: $output"; return 1; }
      run "$dlckpt" verify "ck/$(cat ck/latest)"
      [ "$status" -eq 0 ] || { echo "after kill $i, latest: $output"; return 1; }
    fi
  done
  cat loop.out | sort | uniq -c | sort -rn | head -n 5
  ! grep -q differs loop.out || false
  # Every restart resumed from the newest checkpoint and went on from there.
  [ "$(grep -c "^loaded step" loop.out)" -ge 25 ]
  # Crashed runs leave staging directories, half-removed old steps and, when runs die one
  # after another between a commit and the retention pass, more than --keep steps. The
  # next save that completes tidies all of it: exactly --keep steps and nothing else.
  "$writer" save --dir ck --step 1000000 --mib 4 --keep 3
  ls -A ck
  [ "$(ls ck | grep -c '^step-')" -eq 3 ]
  [ "$(ls -A ck | grep -vc '^step-\|^latest$')" -eq 0 ]
}

# ckpt: links planted in a user's checkpoint directory are never written or deleted through
@test "ckpt: planted links are never followed" {
  # dlother cannot write into dltest's directories, so the names are planted as dltest
  # (a compromised or buggy earlier process of the job's user, or a group member of a
  # directory shared on purpose): links to a file and a directory of dltest's own.
  shared=$(mktemp -d /tmp/dl-ckpt-plant.XXXXXX)
  chmod 755 "$shared"
  home=$shared/home
  mkdir -p "$home/data" "$shared/ck/.tmp-step-000000005.r1"
  echo precious >"$home/precious"
  echo keep >"$home/data/keep"
  ck=$shared/ck
  # At the shard a save of step 5 by run r1 writes (the name it used to truncate), at
  # the staging directory of step 6, at a step directory, a crashed save and a removal.
  ln -s "$home/precious" "$ck/.tmp-step-000000005.r1/shard-00000-of-00001.h5.partial"
  ln -s "$home/precious" "$ck/.tmp-step-000000005.r1/manifest.json"
  ln -s "$home/data" "$ck/.tmp-step-000000006.r1"
  ln -s "$home/data" "$ck/step-000000001"
  ln -s "$home/data" "$ck/.tmp-step-000000002.crashed"
  ln -s "$home/data" "$ck/.del-step-000000003.x"
  ln -s "$home/precious" "$ck/latest"
  chown -hR dltest: "$shared"
  for step in 5 6; do
    run runuser -u dltest -- env DL_CKPT_RUN_ID=r1 "$writer" save --dir "$ck" --step $step
    echo "$output"
    [ "$(cat "$home/precious")" = precious ]
    [ "$(cat "$home/data/keep")" = keep ]
    [ "$status" -eq 0 ]
  done
  [ -f "$ck/latest" ] && [ ! -L "$ck/latest" ]
  [ "$(ls -A "$ck" | tr '\n' ' ')" = "latest step-000000001 step-000000005 step-000000006 " ]
  run runuser -u dltest -- "$writer" load --dir "$ck"
  [ "$status" -eq 0 ]
  [[ "$output" == *"loaded step 6 "* ]]
  run runuser -u dltest -- "$dlckpt" prune "$ck" --keep 1
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(cat "$home/data/keep")" = keep ]
  [ "$(ls -A "$ck" | tr '\n' ' ')" = "latest step-000000001 step-000000006 " ]
}
