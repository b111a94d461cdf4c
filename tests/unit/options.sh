#!/bin/sh
# The options in the code's own tables are documented: every option a tool lists
# (its hidden --list-options, made from the CLI11 table it parses with) is in its man
# page and its --help, and the DL_* variable that sets it in docs/reference.md; every
# --dl-* option (core/spec.cc, the table spank_dl.so registers and `sbatch --help`
# shows) has its usage text and is in spank_dl(8) and docs/reference.md, and every
# --dl-* the pages name exists; every DL_* variable the code reads or sets is in
# docs/reference.md; every tool prints `--version` as "TOOL (slurm-dl) VERSION"; a
# SEE ALSO names only pages that exist. Each miss is one line naming the file.
set -u
src=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${top_builddir:-$src/build}
reference=$src/docs/reference.md

bad=0
fail() {
  echo "FAIL: $*"
  bad=$((bad + 1))
}

# A man page as text: no roff escapes for '-' and no font changes.
man_text() {
  sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\(em/-/g' "$1"
}

# Where a page documents an option: its SYNOPSIS and the tag of each .TP entry, not
# a mention in running text.
man_entries() {
  man_text "$1" | awk '
    /^\.SH/ { synopsis = ($2 == "SYNOPSIS") }
    synopsis || tag || /^\.IP/ { print }
    { tag = /^\.TP/ }'
}

# Whether $2 names option $1 (a whole option: --ckpt is not --ckpt-dir).
has_option() {
  printf '%s\n' "$2" | grep -qE -- "$1([^a-zA-Z0-9-]|\$)"
}

has_word() {
  printf '%s\n' "$2" | grep -qw -- "$1"
}

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$build/config.h")
[ -n "$version" ] || fail "no PACKAGE_VERSION in $build/config.h"
ref_text=$(cat "$reference") || fail "no $reference"

checked=0
for entry in dlrun:launcher:1 dl-jobs:launcher:1 dl-stats:launcher:1 dl-gpu-metrics:launcher:8 \
  dl-gpu-usage:launcher:8 dl-exp:exp:1 \
  dl-search:exp:1 dl-ckpt:ckpt:1 dl-sim:sched/sim:1; do
  tool=${entry%%:*}
  rest=${entry#*:}
  bin=$build/${rest%%:*}/$tool
  page=$src/man/$tool.${rest##*:}
  if [ ! -x "$bin" ]; then
    fail "$bin: not built"
    continue
  fi
  man=$(man_text "$page") || fail "$page: missing"
  entries=$(man_entries "$page")
  got=$("$bin" --version 2>&1)
  [ "$got" = "$tool (slurm-dl) $version" ] ||
    fail "$tool --version: '$got', expected '$tool (slurm-dl) $version'"
  has_option --version "$man" || fail "$page: --version missing"
  list=$("$bin" --list-options) || fail "$tool --list-options: exit $?"
  [ -n "$list" ] || fail "$tool --list-options: nothing listed"
  top_help=$("$bin" --help 2>&1)
  case $top_help in *--list-options*) fail "$tool --help shows the hidden --list-options" ;; esac
  # Lines "SUBCOMMAND --option VARIABLE", "-" for none (core/cli.h).
  while read -r sub option env; do
    checked=$((checked + 1))
    if [ "$sub" = - ]; then
      help=$top_help
      where=$tool
    else
      # shellcheck disable=SC2086 # a nested subcommand is several words
      help=$("$bin" $sub --help 2>&1)
      where="$tool $sub"
    fi
    has_option "$option" "$help" || fail "$where --help: $option missing"
    has_option "$option" "$entries" || fail "$page: $where $option missing (SYNOPSIS or an entry)"
    if [ "$env" != - ]; then
      has_word "$env" "$man" || fail "$page: $env (for $option) missing"
      has_word "$env" "$ref_text" || fail "$reference: $env (for $tool $option) missing"
    fi
  done <<LIST
$list
LIST
done

# The --dl-* options, as spank_dl.so registers them.
spank_page=$src/man/spank_dl.8
spank_man=$(man_text "$spank_page")
spank_entries=$(man_entries "$spank_page")
spank_list=$("$build/tests/unit/spank_options") || fail "spank_options: exit $?"
while read -r option env usage; do
  checked=$((checked + 1))
  [ -n "$usage" ] || fail "$option: no usage text for sbatch --help"
  has_option "$option" "$spank_entries" || fail "$spank_page: $option missing (an entry)"
  has_word "$env" "$spank_man" || fail "$spank_page: $env (for $option) missing"
  has_option "$option" "$ref_text" || fail "$reference: $option missing"
  has_word "$env" "$ref_text" || fail "$reference: $env (for $option) missing"
done <<LIST
$spank_list
LIST
# And the other way: every --dl-* a page names is one of them.
for file in "$src"/man/*.[18] "$src"/docs/*.md; do
  for option in $(man_text "$file" | grep -oE -- '--dl-[a-z][a-z-]*[a-z]' | sort -u); do
    has_option "$option" "$spank_list" || fail "$file: $option is no --dl-* option"
  done
done

# Every DL_* variable the code reads or sets (a string literal naming it).
for var in $(cat "$src"/core/*.cc "$src"/core/*.h "$src"/ckpt/*.cc "$src"/ckpt/dl/*.h \
  "$src"/client/*.cc "$src"/client/*.h "$src"/client/dl/*.h "$src"/exp/*.cc "$src"/exp/*.h \
  "$src"/launcher/*.cc "$src"/launcher/*.h "$src"/spank/*.cc "$src"/sched/*.cc \
  "$src"/sched/plugins/*.cc "$src"/python/slurm_dl/*.py |
  grep -oE '"DL_[A-Z0-9_]*[A-Z0-9]"' | tr -d '"' | sort -u); do
  checked=$((checked + 1))
  has_word "$var" "$ref_text" || fail "$reference: $var (used by the code) missing"
done

# SEE ALSO: the project's own pages it names exist.
for page in "$src"/man/*.[18]; do
  for ref in $(man_text "$page" | sed -n '/^\.SH "*SEE ALSO/,/^\.SH/p' |
    sed -n 's/^\.BR \([a-z_-]*\) (\([18]\)).*/\1.\2/p'); do
    case $ref in dl* | spank_dl*) [ -f "$src/man/$ref" ] || fail "$page: SEE ALSO names $ref" ;; esac
  done
done

echo "options.sh: $checked options and variables checked, $bad missing"
[ "$bad" -eq 0 ]
