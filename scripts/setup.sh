#!/usr/bin/env bash
# Everything a fresh machine of this project's kind needs, then this package.
# Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip --version >/dev/null
# torch: exactly this version (a CPU wheel here); never a range, which would
# pull gigabytes of CUDA wheels from PyPI.
python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" 2>/dev/null \
  || python -m pip install -q torch==2.13.0
python -m pip install -q pytest setuptools
command -v cmake >/dev/null || python -m pip install -q cmake

if [ -n "${WITH_CATCH2:-}" ] && [ ! -f /usr/include/catch2/catch.hpp ]; then
  apt-get update -qq && apt-get install -y -qq catch2 >/dev/null
fi
# Chromium renders the HTML report in one test (skipped without it).
if [ -n "${WITH_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then
  { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
    || echo "setup: no chromium; the report screenshot test will be skipped"
fi

python -m pip install -q --no-build-isolation .
