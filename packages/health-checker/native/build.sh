#!/bin/sh
# Builds dist/lbd-probe, the compiled tcp connect prober (lbd-probe.c), with the C compiler and libc's
# headers only. test/run and deploy/lab/lab up install both (gcc, libc6-dev) on a machine that lacks them.
set -eu
cd "$(dirname "$0")/.."
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "health-checker: no C compiler ($cc) to build dist/lbd-probe: apt-get install gcc libc6-dev (test/run and deploy/lab/lab up install them)" >&2
  exit 1
fi
mkdir -p dist
"$cc" -O2 -Wall -Wextra -Werror -std=gnu11 -o dist/lbd-probe.tmp native/lbd-probe.c
mv dist/lbd-probe.tmp dist/lbd-probe
