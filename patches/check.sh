#!/usr/bin/env bash
# Checks that the patch series applies, in order, to a torch tree (by default
# the installed torch), without touching it: the files the patches name are
# copied to a scratch directory and patched there.
#   bash patches/check.sh [DIR_CONTAINING_torch/]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${1:-$(python -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# The files the series changes; those it creates (--- /dev/null) need no copy.
created=$(awk '/^--- \/dev\/null/ {getline; sub(/^\+\+\+ b\//, ""); print $1}' "$here"/*.patch)
for f in $(sed -n 's#^+++ b/\(\S*\).*#\1#p' "$here"/*.patch | sort -u); do
  mkdir -p "$scratch/$(dirname "$f")"
  if grep -qxF "$f" <<<"$created"; then continue; fi
  if [ ! -f "$root/$f" ]; then echo "FAIL $root has no $f"; exit 1; fi
  cp "$root/$f" "$scratch/$f"
done
for p in "$here"/[0-9]*.patch; do
  if ! out=$(patch -p1 -d "$scratch" --forward --batch -F0 < "$p" 2>&1); then
    echo "FAIL $(basename "$p")"; echo "$out"; exit 1
  fi
  echo "ok   $(basename "$p")"
done
