# Sourced by setup.sh, test.sh and demo.sh: the Python they work in.
#   default: the Python on the PATH, with torch 2.13.0 (a CPU wheel that this
#            machine kind keeps on disk);
#   AOTI_DEBUG_PRINTER_TORCH=2.14.1 (or another release): a virtual
#            environment of its own, .venv/torch-2.14.1, with that wheel of
#            torch from the package index (a CUDA wheel on Linux x86_64);
#   AOTI_DEBUG_PRINTER_PATCHED=1: that torch with patches/ applied (by
#            setup.sh), in .venv/torch-RELEASE-patched, where the package
#            must take Inductor's hooks and wrap no method
#            (AOTI_DEBUG_PRINTER_HOOKS=require).
TORCH_RELEASE=${AOTI_DEBUG_PRINTER_TORCH:-2.13.0}
# The release of transformers the tests build GPT-2 and BERT from.
TRANSFORMERS_RELEASE=5.23.0
# The release of ruff that lints and formats the Python (test_style.py).
RUFF_RELEASE=0.8.6
# The releases of pytest-xdist that spreads the suite over the cores, and of
# pytest: with pytest 9.2, xdist 3.8's --dist loadgroup no longer groups
# (pytest-xdist#1386), and every worker compiles a group's programs again
# (conftest.py stops the run when that happens).
XDIST_RELEASE=3.8.0
PYTEST_RELEASE=9.0.3
# torchvision's release for this torch, where one installs beside it here
# (ResNet-18 in test_findings; PyPI's torchvision does not import beside the
# 2.13.0 CPU wheel, so that run leaves the model out).
case "$TORCH_RELEASE" in
  2.14.1) TORCHVISION_RELEASE=0.29.1 ;;
  *) TORCHVISION_RELEASE="" ;;
esac
venv=""
if [ -n "${AOTI_DEBUG_PRINTER_PATCHED:-}" ]; then
  venv=.venv/torch-$TORCH_RELEASE-patched
  export AOTI_DEBUG_PRINTER_HOOKS=require
elif [ "$TORCH_RELEASE" != 2.13.0 ]; then
  venv=.venv/torch-$TORCH_RELEASE
fi
if [ -n "$venv" ]; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  # shellcheck disable=SC1091
  source "$venv/bin/activate"
fi
