#!/bin/sh
# The domains' layering (ARCHITECTURE.md), checked on the includes: each folder may
# include only its own headers and those of the domains below it. A new domain adds a
# line here, and an upward include fails `make check`, naming the file and the header.
set -u
src=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}

# folder: the domains its code may include (public headers: dl/ckpt*.h are ckpt's,
# dl/client.h is client's).
rules='
core: core
ckpt: core ckpt
client: client
exp: core client exp
launcher: core ckpt client exp launcher
spank: core spank
sched: core sched
'

domain_of() {
  case $1 in
    dl/ckpt*.h) echo ckpt ;;
    dl/client.h) echo client ;;
    src/* | slurm/* | config.h) echo external ;;
    */*) echo "${1%%/*}" ;;
    *) echo local ;;
  esac
}

bad=0
checked=0
for folder in $(echo "$rules" | sed -n 's/^\([a-z_]*\):.*/\1/p'); do
  allowed=" $(echo "$rules" | sed -n "s/^$folder: //p") external local "
  for file in $(find "$src/$folder" -name '*.cc' -o -name '*.h' | sort); do
    checked=$((checked + 1))
    for header in $(sed -n 's/^#include ["<]\([^">]*\)[">].*/\1/p' "$file" | grep '/\|^config.h$' ||
      true); do
      # System headers (<sys/stat.h>, <nlohmann/json.hpp>, ...) are no domain's.
      case $header in sys/* | linux/* | netinet/* | arpa/* | net/* | nlohmann/* | fmt/* | CLI/* | \
        gtest/* | gmock/* | benchmark/* | slurm/* | pmix/* | xxhash/* | H5*/* | yaml-cpp/*) continue ;; esac
      d=$(domain_of "$header")
      case $allowed in
        *" $d "*) ;;
        *)
          echo "layering: ${file#"$src"/} includes $header: $folder/ may include only from$(echo "$allowed" | sed 's/ external local //')" >&2
          bad=$((bad + 1))
          ;;
      esac
    done
  done
done
echo "layering: $checked files checked, $bad upward includes"
[ $bad -eq 0 ]
