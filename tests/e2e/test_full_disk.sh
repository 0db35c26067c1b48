#!/usr/bin/env bash
# Writing to a full disk: a dump that does not fit on a 1 MiB tmpfs must fail
# with one clear line (exit 2) and leave neither the dump nor its temporary
# file behind; a dump that fits still works there. Needs permission to mount
# a tmpfs (root with CAP_SYS_ADMIN, as in CI's container); skipped otherwise.
source "$(dirname "$0")/lib.sh"
FX=$ROOT/fixtures
DISK=$WORK/disk
mkdir -p "$DISK"
trap 'umount "$DISK" 2>/dev/null; rm -rf "$WORK"' EXIT

mounted=0
if mount -t tmpfs -o size=1m layerdiff-e2e "$DISK" 2>"$WORK/mount.err"; then
  mounted=1
fi
why="cannot mount a 1 MiB tmpfs here ($(head -c 120 "$WORK/mount.err" | tr '\n' ' '))"
leftovers() { ls -A "$DISK"; }

case_begin "dump larger than the disk: one-line error, no file left"
if [ $mounted -eq 0 ]; then
  skip_case "$why"
else
  # 57 float32 tensors of 8x16x64 and more: about 2.5 MiB.
  run "$LAYERDIFF" run --backends reference "$FX/transformer.onnx" --input-shapes batch:8 --dump "$DISK/d.h5"
  expect_exit 2
  expect_stderr_contains "dump '$DISK/d.h5'"
  expect_stderr_contains "No space left on device"
  expect_stderr_one_line
  expect_true "nothing left on the disk (found: $(leftovers | tr '\n' ' '))" test -z "$(leftovers)"
fi

case_begin "the disk is usable again: a small dump fits"
if [ $mounted -eq 0 ]; then
  skip_case "$why"
else
  run "$LAYERDIFF" run --backends reference "$FX/transformer.onnx" --input-shapes batch:1 --layers outputs --dump "$DISK/small.h5"
  expect_exit 0
  expect_file_exists "$DISK/small.h5"
  expect_true "the dump reads back" "$LAYERDIFF" inspect "$DISK/small.h5"
  rm -f "$DISK/small.h5"
fi

case_begin "disk filled by another file while the dump is written"
if [ $mounted -eq 0 ]; then
  skip_case "$why"
else
  # 900 KiB taken: the inputs fit, the first layers do not.
  head -c 921600 /dev/zero >"$DISK/filler"
  run "$LAYERDIFF" run --backends reference "$FX/cnn.onnx" --dump "$DISK/c.h5"
  expect_exit 2
  expect_stderr_contains "No space left on device"
  expect_stderr_one_line
  expect_no_file "$DISK/c.h5"
  expect_true "no temporary file left" sh -c "! ls -A '$DISK' | grep -q tmp"
  rm -f "$DISK/filler"
fi

case_begin "inspect --json into a file on the full disk"
if [ $mounted -eq 0 ]; then
  skip_case "$why"
else
  head -c 1048576 /dev/zero >"$DISK/filler" 2>/dev/null
  run sh -c "'$LAYERDIFF' inspect --json --layers '$FX/transformer.onnx' >'$DISK/out.json'"
  expect_exit 2
  expect_stderr_contains "cannot write"
  expect_stderr_one_line
  rm -f "$DISK/filler" "$DISK/out.json"
fi

finish
