#!/bin/sh
# Builds dist/lbd-ctnl, connection sync's ctnetlink helper (lbd-ctnl.c), with the C compiler and libc's headers
# only. test/run and deploy/lab/lab up install both (gcc, libc6-dev) on a machine that lacks them.
set -eu
cd "$(dirname "$0")/.."
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "dataplane-nft: no C compiler ($cc) to build dist/lbd-ctnl: apt-get install gcc libc6-dev (test/run and deploy/lab/lab up install them)" >&2
  exit 1
fi
mkdir -p dist
"$cc" -O2 -Wall -Wextra -Werror -std=gnu11 -o dist/lbd-ctnl.tmp native/lbd-ctnl.c
mv dist/lbd-ctnl.tmp dist/lbd-ctnl
