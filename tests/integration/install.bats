#!/usr/bin/env bats
# An administrator's install: `make install` puts every piece where what uses it looks,
# and a cluster runs the demo job from the installed files alone.

load helpers

setup() { cd "$BATS_TEST_TMPDIR"; }

# configure refuses a Slurm release it does not support, in one line naming those it does
@test "configure refuses an unsupported Slurm" {
  # Slurm 23.11's version header in front of the installed one.
  mkdir -p fake/slurm
  echo '#define SLURM_VERSION_NUMBER 0x170b05' >fake/slurm/slurm_version.h
  mkdir build && cd build
  run "$DL_ROOT/configure" -q CPPFLAGS="-I$BATS_TEST_TMPDIR/fake"
  [ "$status" -ne 0 ]
  [ "${lines[${#lines[@]} - 1]}" = "configure: error: Slurm 23.11.5 is not supported: slurm-dl supports Slurm 22.05 and 24.11" ]
  [ ! -f Makefile ]
}

# make install puts slurm_dl where Debian's python3 imports it from
@test "make install: python3 imports slurm_dl" {
  dest=$BATS_TEST_TMPDIR/root
  make -s -C "$DL_BUILD_DIR/python" install DESTDIR="$dest" >/dev/null
  installed=$(cd "$dest" && find . -path '*/slurm_dl/__init__.py' | sed 's#^\.##; s#/slurm_dl/__init__.py$##')
  [ -n "$installed" ]
  # That directory, without DESTDIR, is on the interpreter's own sys.path ...
  /usr/bin/python3 -c 'import sys; sys.exit(0 if sys.argv[1] in sys.path else 1)' "$installed"
  # ... so the installed copy imports with no PYTHONPATH, once it is really there (the
  # DESTDIR copy just before it: numpy and the rest still come from the directory itself).
  env -u PYTHONPATH /usr/bin/python3 -c 'import sys
sys.path = [q for p in sys.path for q in ([sys.argv[2] + p, p] if p == sys.argv[1] else [p])]
import slurm_dl, slurm_dl.ckpt
assert slurm_dl.__file__.startswith(sys.argv[2]), slurm_dl.__file__' "$installed" "$dest"
}

# a clone in a private directory (root's home is 0700) works from a copy the daemons and test users
# reach
@test "a clone in a 0700 home works from a copy" {
  private=$BATS_TEST_TMPDIR/home
  install -d -m 0700 "$private"
  git clone -q "$DL_ROOT" "$private/slurm-dl"
  chmod -R go-rwx "$private/slurm-dl"
  run env -u DL_BUILD_DIR -u DL_CACHE_DIR "$private/slurm-dl/scripts/test" --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"is private"*"working from a copy in /var/tmp/slurm-dl-"* ]]
  [[ "$output" == *"The whole test suite"* ]]
  copy=$(sed -n 's/.*working from a copy in \(\/var\/tmp\/slurm-dl-[0-9a-f]*\).*/\1/p' <<<"$output")
  # What jobs run as an unprivileged user is readable and executable there.
  runuser -u dltest -- test -r "$copy/src/examples/train_ddp.py"
  runuser -u dltest -- test -x "$copy/src/scripts/minicluster"
  # The clone's minicluster acts on the copy's cluster (the demo's advice to stop it
  # with `scripts/minicluster down` is typed in the clone).
  run env -u DL_BUILD_DIR -u DL_CACHE_DIR -u DL_MINICLUSTER_DIR "$private/slurm-dl/scripts/minicluster" env
  [ "$status" -eq 1 ]
  [[ "$output" == *"no cluster in $copy/build/minicluster "* ]]
  rm -rf "$copy"
}

teardown() {
  if [ -n "${admin_top:-}" ]; then
    "$admin_top/scripts/minicluster" down --dir "$admin_top/cluster" >/dev/null 2>&1 || true
    rm -rf "$admin_top"
  fi
}

# Issue 16, item 8: the admin's install, tested as an admin uses it.
# an admin's make install runs the PyTorch example on a cluster that sees only the installed files
@test "an admin's make install runs the PyTorch example" {
  # The build is configured with the admin guide's line (scripts/bootstrap uses it), so
  # `make install DESTDIR=` of this build is exactly what an administrator installs.
  guide_args=$(sed -n '/^\.\/configure /,/[^\\]$/p' "$DL_ROOT/docs/admin/install.md" |
    tr -d '\\\n' | sed 's/^\.\/configure //' | tr ' ' '\n' | grep -- '^--prefix\|^--libdir\|^--sysconfdir')
  [ "$(wc -w <<<"$guide_args")" -eq 3 ]
  configured=" $("$DL_BUILD_DIR/config.status" --config) "
  for arg in $guide_args; do [[ $configured == *" $arg "* ]]; done

  # A fresh root; the cluster's directory and the minicluster script outside the source
  # and build trees (munged must reach the directory).
  admin_top=$(mktemp -d /var/tmp/dl-admin-install.XXXXXX)
  chmod 0755 "$admin_top"
  root=$admin_top/root dir=$admin_top/cluster
  make -s -C "$DL_BUILD_DIR" install DESTDIR="$root" >/dev/null
  # The scripts with the library they source.
  cp -r "$DL_ROOT/scripts" "$admin_top/scripts"
  port=$((${DL_MINICLUSTER_PORT_BASE:-16800} + 1100))
  # Its daemons, and so its jobs and steps, see the source and build trees empty: a
  # tmpfs over each in their own mount namespace.
  unshare --mount --propagation private sh -c '
    mc=$1 root=$2 dir=$3 port=$4
    shift 4
    cd /
    for d; do [ -d "$d" ] && mount -t tmpfs -o size=64k,mode=0755 hidden "$d"; done
    exec "$mc" up --installed "$root" --dir "$dir" --port-base "$port" --nodes 2' \
    sh "$admin_top/scripts/minicluster" "$root" "$dir" "$port" "$DL_ROOT" "$DL_BUILD_DIR"
  eval "$("$admin_top/scripts/minicluster" env --dir "$dir")"
  ctld=$(head -n 1 "$dir/run/slurmctld.pid")
  hidden() { as_seen_by "$ctld" "$admin_top" "$@"; }
  for d in "$DL_ROOT" "$DL_BUILD_DIR"; do [ -z "$(hidden sh -c 'ls -A "$1" 2>/dev/null' sh "$d")" ]; done

  # Slurm's configuration names installed files only ...
  run grep -e "$DL_ROOT" -e "$DL_BUILD_DIR" "$dir/slurm.conf" "$dir/plugstack.conf"
  [ "$status" -eq 1 ]
  plugins=$root/usr/lib/x86_64-linux-gnu/slurm-dl
  # ... and slurmctld runs the installed controller plugins.
  for p in job_submit_dl site_factor_dl preempt_dl; do hidden grep -q " $plugins/$p.so$" "/proc/$ctld/maps"; done

  # A step's dlrun, slurm_dl and libdlckpt, and the SPANK plugin in its slurmstepd, are
  # the installed ones (no --mpi: cli_filter/dl chooses PMIx for a DL step).
  run step_uses
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "$root/usr/bin/dlrun" ]
  [ "${lines[1]}" = "$root/usr/lib/python3/dist-packages/slurm_dl/__init__.py" ]
  [ "${lines[2]}" = "$root/usr/lib/x86_64-linux-gnu/libdlckpt.so.0.0.0" ]
  [ "${lines[3]}" = "$plugins/spank_dl.so" ]
  [ "${lines[4]}" = "mpi=pmix" ]

  # The demo job: the installed PyTorch example and its sbatch script, as installed, with
  # a checkpoint every second (slurm_dl.torch and libdlckpt below ROOT write them).
  examples=$root/usr/share/doc/slurm-dl/examples
  job=$(hidden env TRAIN_DDP="$examples/train_ddp.py" sbatch --parsable -o "$admin_top/job.out" \
    --dl-ckpt-every=1s "$examples/train_ddp.sbatch" --steps 30 --step-ms 100 --out "$admin_top/final.bin")
  wait_state "$job" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL' 120
  cat "$admin_top/job.out"
  job_comment "$job"
  [ "$(job_state "$job")" = COMPLETED ]
  grep -q '\] final step 29 loss' "$admin_top/job.out"
  [ -s "$admin_top/final.bin" ]
  [[ $(job_comment "$job") == "dl: 2 GPUs as 2x1"*"COMPLETED step 29, ckpt "* ]]
  # The installed dl-ckpt verifies what the job wrote.
  run hidden dl-ckpt verify "$dir/ckpt/root/$job"
  echo "$output"
  [ "$status" -eq 0 ]
}
