#!/usr/bin/env bash
# On a CUDA machine (the H100 of the device tool): build this package against
# the torch installed there and run the whole suite, logs under $1.
#   bash test/gpu/run.sh LOGDIR [pytest args]
set -uo pipefail
cd "$(dirname "$0")/../.."
logs=${1:?usage: run.sh LOGDIR [pytest args]}; shift
mkdir -p "$logs"
# Inductor's default compiler there links a libstdc++ that the loaded
# packages then clash with; the system one does not.
export CXX=/usr/bin/g++ PYTHONUNBUFFERED=1
# The GPU image has no Catch2: the C++ suite is skipped there, not failed.
export AOTI_DEBUG_PRINTER_NO_CATCH2=1
{ python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } 2>&1 | tee "$logs/env.txt"
python3 -m pip install -q --no-build-isolation . >"$logs/build.log" 2>&1 || { tail -50 "$logs/build.log"; exit 1; }
python3 -m pytest -p no:cacheprovider -p no:benchmark -n "${JOBS:-6}" "$@" 2>&1 | tee "$logs/pytest.log"
exit "${PIPESTATUS[0]}"
