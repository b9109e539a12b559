#!/usr/bin/env bash
# Checks that the patch series applies, in order, to a torch tree (by default
# the installed torch), without touching it: the files the patches name are
# copied to a scratch directory and patched there.
#   bash patches/check.sh [DIR_CONTAINING_torch/] [KEEP_DIR]
# A patch of torch-VERSION/ (the tree's torch/version.py) takes the place of
# the one of the same name here: the same change, with that release's context.
# With KEEP_DIR, the patched copies are left there (KEEP_DIR/torch/...).
# A tree built with the series already (it has the files the series adds) is checked
# the other way: each patch must come back out, last first, and KEEP_DIR then
# holds the stock copies.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=${1:-$(python -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')}
if [ -n "${2:-}" ]; then
  scratch=$2
  mkdir -p "$scratch"
else
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
fi
version=$(sed -n "s/^__version__ = '\([0-9.]*\).*/\1/p" "$root/torch/version.py" 2>/dev/null || true)
series=()
for p in "$here"/[0-9]*.patch; do
  pinned="$here/torch-$version/$(basename "$p")"
  if [ -n "$version" ] && [ -f "$pinned" ]; then series+=("$pinned"); else series+=("$p"); fi
done
# The files the series changes; those it creates (--- /dev/null) need no copy
# unless the tree has the series already.
created=$(awk '/^--- \/dev\/null/ {getline; sub(/^\+\+\+ b\//, ""); print $1}' "${series[@]}")
direction=(--forward) applied=""
if [ -n "$created" ] && (cd "$root" && ls $created) >/dev/null 2>&1; then
  direction=(--reverse) applied=", applied in this tree"
  mapfile -t series < <(printf '%s\n' "${series[@]}" | tac)
fi
for f in $(sed -n 's#^+++ b/\(\S*\).*#\1#p' "${series[@]}" | sort -u); do
  mkdir -p "$scratch/$(dirname "$f")"
  if [ -z "$applied" ] && grep -qxF "$f" <<<"$created"; then continue; fi
  if [ ! -f "$root/$f" ]; then echo "FAIL $root has no $f"; exit 1; fi
  cp "$root/$f" "$scratch/$f"
done
for p in "${series[@]}"; do
  if ! out=$(patch -p1 -d "$scratch" "${direction[@]}" --batch --no-backup-if-mismatch -F0 < "$p" 2>&1); then
    echo "FAIL $(basename "$p")"; echo "$out"; exit 1
  fi
  if [ "$(dirname "$p")" = "$here" ]; then pin=""; else pin="torch-$version/"; fi
  note="$pin$applied" note=${note#, }
  echo "ok   $(basename "$p")${note:+ ($note)}"
done
