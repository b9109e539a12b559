#!/usr/bin/env bash
# The demo: an unchanged AOTInductor script, run with the printer at level 2.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/python_env.sh
AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=2 python examples/their_script.py
