#!/usr/bin/env bash
# All tests: Catch2 (built by CMake, run from test_cpp.py) and pytest; Chromium
# for the report's screenshot test. AOTI_DEBUG_PRINTER_TORCH picks the torch
# (scripts/python_env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_CATCH2=1 WITH_CHROMIUM=1 bash scripts/setup.sh
source scripts/python_env.sh
# One worker per core: most of the time is AOTInductor compiles, in Python
# and one compiler process each. Tests that share a compiled package stay on
# one worker (xdist_group); pytest-benchmark, where installed, would refuse.
python -m pytest -n "${PYTEST_WORKERS:-auto}" --dist loadgroup -p no:benchmark "$@"
