#!/bin/sh
# Builds the data plane's netlink helpers with the C compiler and libc's headers only: dist/lbd-ctnl
# (connection sync's ctnetlink helper, lbd-ctnl.c) and dist/lbd-nfbatch (nf_tables batches, lbd-nfbatch.c).
# test/run and deploy/lab/lab up install both (gcc, libc6-dev) on a machine that lacks them.
set -eu
cd "$(dirname "$0")/.."
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "dataplane-nft: no C compiler ($cc) to build dist/lbd-ctnl and dist/lbd-nfbatch: apt-get install gcc libc6-dev (test/run and deploy/lab/lab up install them)" >&2
  exit 1
fi
mkdir -p dist
for helper in lbd-ctnl lbd-nfbatch; do
  "$cc" -O2 -Wall -Wextra -Werror -std=gnu11 -o "dist/$helper.tmp" "native/$helper.c"
  mv "dist/$helper.tmp" "dist/$helper"
done
# The same write mode as a Node addon (dist/ctnl-writer.node, Node-API): a standby's injects on its own thread.
"$cc" -O2 -Wall -Wextra -Werror -Wno-unused-function -std=gnu11 -shared -fPIC -o dist/ctnl-writer.node.tmp native/ctnl-writer.c
mv dist/ctnl-writer.node.tmp dist/ctnl-writer.node
