#!/usr/bin/env bash
# The BLAS kernel policy (docs/architecture.md, "BLAS"): the CPU decides, a
# preset OPENBLAS_CORETYPE is ignored and named on the profile line,
# LAYERDIFF_BLAS_CORETYPE wins, and a bad one is a one-line usage error.
source "$(dirname "$0")/lib.sh"
FX=$ROOT/fixtures
cd "$WORK" || exit 1
has_flag() { grep -qw "$1" /proc/cpuinfo 2>/dev/null; }

case_begin "a preset OPENBLAS_CORETYPE is ignored, and the profile says so"
run env OPENBLAS_CORETYPE=Prescott LAYERDIFF_BLAS_CORETYPE= "$LAYERDIFF" run "$FX/cnn.onnx" \
  --backends reference --profile
expect_exit 0
expect_stdout_contains "OPENBLAS_CORETYPE=Prescott in the environment ignored"
if has_flag avx512f && has_flag avx512bw && has_flag avx512dq && has_flag avx512vl; then
  expect_stdout_contains "openblas 0.3.21 SkylakeX (chosen by layerdiff for this AVX-512 CPU"
elif has_flag avx2 && has_flag fma; then
  expect_stdout_contains "Haswell (chosen by layerdiff for this AVX2+FMA CPU"
fi
expect_stdout_not_contains " Prescott (" # the kernel that runs is not the preset one

case_begin "LAYERDIFF_BLAS_CORETYPE chooses the kernel (any case)"
if has_flag avx2 && has_flag fma; then
  run env OPENBLAS_CORETYPE=SkylakeX LAYERDIFF_BLAS_CORETYPE=haswell "$LAYERDIFF" run \
    "$FX/cnn.onnx" --backends reference --profile
  expect_exit 0
  expect_stdout_contains " Haswell (LAYERDIFF_BLAS_CORETYPE=haswell set by the user)"
else
  skip_case "this CPU has no AVX2+FMA"
fi

case_begin "an unknown LAYERDIFF_BLAS_CORETYPE is a one-line usage error listing the names"
run env LAYERDIFF_BLAS_CORETYPE=Skylake "$LAYERDIFF" run "$FX/cnn.onnx" --backends reference
expect_exit 2
expect_stderr_one_line
expect_stderr_contains "LAYERDIFF_BLAS_CORETYPE=Skylake is not an OpenBLAS core type (one of Katmai,"
expect_stderr_contains "SkylakeX, Cooperlake, SapphireRapids)"

case_begin "a kernel this CPU cannot run is refused, naming the missing instructions"
if has_flag fma4; then
  skip_case "this CPU has FMA4"
else
  run env LAYERDIFF_BLAS_CORETYPE=Bulldozer "$LAYERDIFF" run "$FX/cnn.onnx" --backends reference
  expect_exit 2
  expect_stderr_one_line
  expect_stderr_contains "LAYERDIFF_BLAS_CORETYPE=Bulldozer: OpenBLAS's Bulldozer kernel needs FMA4, which this CPU lacks"
fi

finish
