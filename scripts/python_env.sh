# Sourced by setup.sh, test.sh and demo.sh: the Python they work in.
#   default: the Python on the PATH, with torch 2.13.0 (a CPU wheel that this
#            machine kind keeps on disk);
#   AOTI_DEBUG_PRINTER_TORCH=2.14.1 (or another release): a virtual
#            environment of its own, .venv/torch-2.14.1, with that wheel of
#            torch from the package index (a CUDA wheel on Linux x86_64).
TORCH_RELEASE=${AOTI_DEBUG_PRINTER_TORCH:-2.13.0}
# The release of transformers the tests build GPT-2 and BERT from.
TRANSFORMERS_RELEASE=5.23.0
# The release of ruff that lints and formats the Python (test_style.py).
RUFF_RELEASE=0.8.6
if [ "$TORCH_RELEASE" != 2.13.0 ]; then
  venv=.venv/torch-$TORCH_RELEASE
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  # shellcheck disable=SC1091
  source "$venv/bin/activate"
fi
