#!/usr/bin/env bash
# Build recordkeeper._speedups with AddressSanitizer + UBSan and run the engine's tests and the
# fuzz harness against it (issue 14).  Run before each release; it must end "sanitizers: clean".
#
#   scripts/sanitize.sh                          # RECORDKEEPER_FUZZ_EXAMPLES=500 by default
#   RECORDKEEPER_FUZZ_EXAMPLES=5000 scripts/sanitize.sh
#   PYTHON=/path/to/python CC=gcc-12 scripts/sanitize.sh
#
# The sanitized build goes into a scratch copy of client/ (the tree's own build is untouched).
# libasan must be loaded before Python starts, hence LD_PRELOAD.  PYTHONMALLOC=malloc: the
# extension's PyMem_Malloc/PyMem_Calloc buffers otherwise come from pymalloc's arenas, where
# ASan sees no bounds (an overflow of a small PyMem buffer went unseen that way).  Leak
# detection is off: the interpreter keeps its allocations until exit on purpose.  Any ASan or
# UBSan report aborts the test process, so the run fails.  The fuzz harness keeps its
# TensorFlow oracle (a subprocess started without the sanitizers); the engine tests that import
# TensorFlow in-process are left out (-m "not tf" on those files): TensorFlow is not built for
# it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
CC=${CC:-gcc}
"$CC" --version | head -1

SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
cp -r client "$SCRATCH/client"
find "$SCRATCH/client" -name '_speedups*.so' -delete
INCLUDE=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
SUFFIX=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
"$CC" -shared -fPIC -O1 -g -fno-omit-frame-pointer -Wall \
    -fsanitize=address,undefined -fno-sanitize-recover=undefined \
    -I"$INCLUDE" client/recordkeeper/_speedups.c \
    -o "$SCRATCH/client/recordkeeper/_speedups$SUFFIX"

LIBASAN=$("$CC" -print-file-name=libasan.so)
export LD_PRELOAD=$LIBASAN
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
export PYTHONMALLOC=malloc
export PYTHONPATH=$SCRATCH/client:$ROOT/service
export RECORDKEEPER_FUZZ_EXAMPLES=${RECORDKEEPER_FUZZ_EXAMPLES:-500}

"$PYTHON" -c 'import recordkeeper._speedups as s; print("sanitized build:", s.__file__)'
"$PYTHON" -m pytest -q -p no:cacheprovider --timeout=0 tests/fuzz
"$PYTHON" -m pytest -q -p no:cacheprovider -m "not tf" \
    tests/client/test_tfrecord.py tests/client/test_tfrecord_hostile.py \
    tests/client/test_schema_inference.py tests/client/test_riegeli_walk.py \
    tests/client/test_record_diff_native.py tests/core/test_record_index.py
echo "sanitizers: clean (AddressSanitizer + UBSan, RECORDKEEPER_FUZZ_EXAMPLES=$RECORDKEEPER_FUZZ_EXAMPLES)"
