#!/usr/bin/env bash
# Everything a fresh machine of this project's kind needs, then this package.
# Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python_env.sh

python -m pip --version >/dev/null
# torch: exactly this release; never a range, which would pull gigabytes of
# CUDA wheels from PyPI.
python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_RELEASE')" 2>/dev/null \
  || python -m pip install -q "torch==$TORCH_RELEASE"
# A patched torch: the series applied to the environment's own torch, once
# (check.sh patches copies, which then replace the installed files; on a
# torch that has the series, it says so and leaves stock copies, unused).
if [ -n "${AOTI_DEBUG_PRINTER_PATCHED:-}" ]; then
  site=$(python -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  copies=$(mktemp -d)
  checked=$(bash patches/check.sh "$site" "$copies")
  echo "$checked"
  grep -q "applied in this tree" <<<"$checked" || cp -r "$copies/torch" "$site/"
  rm -rf "$copies"
fi
# What pip would install for an isolated build (a recent enough CMake), read
# from pyproject.toml; then the tests' needs.
python - <<'PY' | xargs python -m pip install -q
import tomllib
print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"])
PY
# transformers: the GPT-2 and BERT architectures of the finding tools' tests.
# pytest-xdist: the suite runs on every core (scripts/test.sh).
python -m pip install -q "pytest==$PYTEST_RELEASE" "pytest-xdist==$XDIST_RELEASE" \
  "transformers==$TRANSFORMERS_RELEASE" "ruff==$RUFF_RELEASE"
# torchvision: ResNet-18, where a release of it imports beside this torch.
if [ -n "$TORCHVISION_RELEASE" ]; then
  python -m pip install -q "torchvision==$TORCHVISION_RELEASE"
fi

if [ -n "${WITH_CATCH2:-}" ] && [ ! -f /usr/include/catch2/catch.hpp ]; then
  apt-get update -qq && apt-get install -y -qq catch2 >/dev/null
fi
# clang-format checks the C++ style (test_style.py), beside Catch2's tests.
if [ -n "${WITH_CATCH2:-}" ] && ! command -v clang-format >/dev/null; then
  apt-get update -qq && apt-get install -y -qq clang-format >/dev/null
fi
# Chromium renders the HTML report in one test (skipped without it).
if [ -n "${WITH_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then
  { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
    || echo "setup: no chromium; the report screenshot test will be skipped"
fi

python -m pip install -q --no-build-isolation .
