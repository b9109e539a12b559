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

# Debian's packages, after one index update for all that are missing:
# Catch2 and clang-format (test_style.py checks the C++ style) beside the
# C++ tests; Chromium renders the HTML report in one test (skipped without).
debian=()
if [ -n "${WITH_CATCH2:-}" ]; then
  [ -f /usr/include/catch2/catch.hpp ] || debian+=(catch2)
  command -v clang-format >/dev/null || debian+=(clang-format)
fi
chromium_missing=""
if [ -n "${WITH_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then
  chromium_missing=1
fi
if [ ${#debian[@]} -gt 0 ] || [ -n "$chromium_missing" ]; then
  # Only Chromium may go without: a failed update then just skips it.
  apt-get update -qq || [ ${#debian[@]} -eq 0 ]
fi
if [ ${#debian[@]} -gt 0 ]; then
  apt-get install -y -qq "${debian[@]}" >/dev/null
fi
if [ -n "$chromium_missing" ]; then
  apt-get install -y -qq chromium >/dev/null \
    || echo "setup: no chromium; the report screenshot test will be skipped"
fi

# The package, from a wheel kept for each build of torch in build/wheels/:
# the patched run's torch differs from the plain run's in Python files only,
# so it installs the wheel that run built from the same tree rather than
# building it again (about 50 s on two cores). Another file in the
# tree, torch, Python, CMAKE_ARGS or CXX builds again, incrementally
# (setup.py's CMake build directory). scripts/wheel_key.py makes the keys.
read -r torch_key tree_key < <(python scripts/wheel_key.py)
[ -n "${tree_key:-}" ] || { echo "setup: cannot tell this torch or tree apart" >&2; exit 1; }
wheels=build/wheels/$torch_key
if [ "$(cat "$wheels/tree" 2>/dev/null)" != "$tree_key" ]; then
  # setuptools copies the package into build/lib and never removes what the
  # tree no longer has: a module moved away would ship in the wheel.
  rm -rf "$wheels" build/lib.*
  python -m pip wheel -q --no-deps --no-build-isolation -w "$wheels" .
  echo "$tree_key" >"$wheels/tree"
fi
python -m pip install -q --no-deps --force-reinstall "$wheels"/*.whl
