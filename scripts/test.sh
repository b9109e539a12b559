#!/usr/bin/env bash
# All tests: Catch2 (built by CMake, run from test_cpp.py) and pytest; Chromium
# for the report's screenshot test.
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_CATCH2=1 WITH_CHROMIUM=1 bash scripts/setup.sh
python -m pytest "$@"
