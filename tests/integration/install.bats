#!/usr/bin/env bats
# An administrator's install: `make install` puts every piece where what uses it looks.

load helpers

@test "make install puts slurm_dl where Debian's python3 imports it from" {
  dest=$BATS_TEST_TMPDIR/root
  make -s -C "$DL_BUILD_DIR/python" install DESTDIR="$dest" >/dev/null
  installed=$(cd "$dest" && find . -path '*/slurm_dl/__init__.py' | sed 's#^\.##; s#/slurm_dl/__init__.py$##')
  [ -n "$installed" ]
  # That directory, without DESTDIR, is on the interpreter's own sys.path ...
  /usr/bin/python3 -c 'import sys; sys.exit(0 if sys.argv[1] in sys.path else 1)' "$installed"
  # ... so the installed copy imports with no PYTHONPATH, once it is really there.
  env -u PYTHONPATH /usr/bin/python3 -c 'import sys
sys.path = [p if p != sys.argv[1] else sys.argv[2] + p for p in sys.path]
import slurm_dl, slurm_dl.ckpt
assert slurm_dl.__file__.startswith(sys.argv[2]), slurm_dl.__file__' "$installed" "$dest"
}

@test "a clone in a private directory (root's home is 0700) works from a copy the daemons and test users reach" {
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
  rm -rf "$copy"
}
