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
