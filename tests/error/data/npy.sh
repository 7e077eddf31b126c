#!/usr/bin/env bash
# Writes a small .npy file for the error tests, valid or not:
#   npy.sh OUT 'HEADER' DATA_BYTES [VERSION]
# HEADER is written as given (no padding) after the magic, the version (default 1) and the
# header length, which is computed; DATA_BYTES zero bytes follow.
set -eu
export LC_ALL=C
out=$1 header=$2 nbytes=$3 version=${4:-1}
len=${#header}
byte() { printf "\\x$(printf %02x $(($1 & 255)))"; }
{
  printf '\x93NUMPY'
  byte "$version"
  byte 0
  byte "$len"
  byte $((len >> 8))
  if [ "$version" != 1 ]; then
    byte $((len >> 16))
    byte $((len >> 24))
  fi
  printf '%s' "$header"
  head -c "$nbytes" /dev/zero
} > "$out"
