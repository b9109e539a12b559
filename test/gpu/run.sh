#!/usr/bin/env bash
# On a CUDA machine (the H100 of the device tool): build this package against
# the torch installed there, then run the tests and the GPU benchmarks, logs
# under LOGDIR.
#   bash test/gpu/run.sh LOGDIR [all|tests|bench] [pytest args]
# (WITH_IMA=0 leaves out the IMA comparison, BENCH_ARGS go to bench_gpu.py,
# WHEELS=DIR builds a wheel there once and installs it in later calls)
# "tests" runs the whole suite (the GPU tests included) and, beside it, the
# IMA comparison (bench/ima_pinpoint.py: it times nothing); "bench" the
# timed benchmark (bench/bench_gpu.py) on an otherwise idle GPU; "all" both.
set -uo pipefail
cd "$(dirname "$0")/../.."
logs=${1:?usage: run.sh LOGDIR [all|tests|bench] [pytest args]}; shift
what=${1:-all}; [ $# -gt 0 ] && shift
mkdir -p "$logs"
# Inductor's default compiler there links a libstdc++ that the loaded
# packages then clash with; the system one does not.
# nvcc's host compiler must be that one too (the image may set CUDAHOSTCXX).
echo "CUDAHOSTCXX was: ${CUDAHOSTCXX:-unset}; CMAKE_CUDA_HOST_COMPILER: ${CMAKE_CUDA_HOST_COMPILER:-unset}"
export CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ PYTHONUNBUFFERED=1
# The GPU image has no Catch2: the C++ suite is skipped there, not failed.
export ADP_NO_CATCH2=1
# Never multicast over NVLink (shared hosts).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), "x", torch.cuda.device_count())'
  cmake --version | head -1
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } 2>&1 | tee "$logs/env.txt"
# WHEELS=DIR: a machine there starts bare, so one call builds a wheel into
# DIR (kept from $OUT) and later calls install that wheel, not build again.
wheels=${WHEELS:-}
if [ -z "$wheels" ] || ! compgen -G "$wheels/aoti_debug_printer-*.whl" >/dev/null; then
  # A fresh build: a kept CMake cache would keep its old host compiler.
  rm -rf build
  if [ -n "$wheels" ]; then
    python3 -m pip wheel -v --no-deps --no-build-isolation -w "$wheels" . >"$logs/build.log" 2>&1
  else
    python3 -m pip install -v --no-build-isolation . >"$logs/build.log" 2>&1
  fi || { tail -60 "$logs/build.log"; exit 1; }
  grep -m1 "CUDA statistics kernel" "$logs/build.log" | tee -a "$logs/env.txt"
  # nvcc must compile host code with CXX: objects from another GCC crash in
  # this process (libstdc++ mismatch).
  grep -q "CUDA statistics kernel ON .*host compiler $(command -v "$CXX"))\$" "$logs/build.log" \
    || { echo "no CUDA kernel, or nvcc's host compiler is not $CXX"; exit 1; }
fi
if [ -n "$wheels" ]; then
  python3 -m pip install -q --no-deps --force-reinstall "$wheels"/aoti_debug_printer-*.whl \
    >>"$logs/build.log" 2>&1 || { tail -60 "$logs/build.log"; exit 1; }
  echo "installed $(basename "$wheels"/aoti_debug_printer-*.whl)" | tee -a "$logs/env.txt"
fi
rc=0
if [ "$what" = all ] || [ "$what" = tests ]; then
  # Tests sharing a compiled package run on one worker (xdist groups); each
  # result is logged as it comes (-v), and a hung test cannot eat the lease.
  timeout=()
  python3 -c "import pytest_timeout" 2>/dev/null && timeout=(--timeout "${TEST_TIMEOUT:-300}")
  ima=""
  if [ "${WITH_IMA:-1}" = 1 ]; then
    timeout "${BENCH_TIMEOUT:-480}" python3 bench/ima_pinpoint.py >"$logs/ima_pinpoint.log" 2>&1 &
    ima=$!
  fi
  # Past SUITE_TIMEOUT pytest gets SIGINT, so it still reports what failed;
  # lines carry the seconds since the start.
  timeout -s INT "${SUITE_TIMEOUT:-3000}" \
    python3 -m pytest -p no:cacheprovider -p no:benchmark -n "${JOBS:-8}" --dist loadgroup -v -rfE \
    --durations=10 "${timeout[@]}" "$@" 2>&1 | while IFS= read -r line; do printf '%4ds %s\n' "$SECONDS" "$line"; done | tee "$logs/pytest.log"
  rc=${PIPESTATUS[0]}
  if [ -n "$ima" ]; then
    wait "$ima" || rc=1
    cat "$logs/ima_pinpoint.log"
  fi
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  timeout "${BENCH_TIMEOUT:-480}" python3 bench/bench_gpu.py ${BENCH_ARGS:-} 2>&1 | tee "$logs/bench_gpu.log" || rc=1
fi
exit "$rc"
