#!/usr/bin/env bash
# Checks the Debian packages fusebox needs (dpkg-query) before `make` configures and builds.
#
# Required packages missing: as root, installs them (and the optional ones the archive has) with
# apt-get; otherwise prints the exact apt-get command and exits 1. Optional packages (CPU code
# generation, ONNX import, ONNX's backend node tests, oneDNN, graphviz) are installed when
# available and only reported when not: the build turns those components off (CMake prints which)
# and onnx_node_tests_test skips.
set -u

required=(cmake ninja-build g++ make libgtest-dev libgmock-dev llvm-14-tools libbenchmark-dev)
# `make fuzz` (FUSEBOX_SETUP_FUZZ=1) also needs clang and libFuzzer's runtime. The g++ sanitizer
# runtimes (libasan8, libubsan1, libtsan2) come with g++ (libgcc-12-dev depends on them).
[ -n "${FUSEBOX_SETUP_FUZZ:-}" ] && required+=(clang-14 libclang-rt-14-dev)
optional=(llvm-14-dev libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata libdnnl-dev graphviz)
# Root tries to install missing optional packages once per build directory, not on every make.
stamp=${FUSEBOX_BUILD_DIR:-build}/.setup-optional-tried

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup: not a Debian-based system (no dpkg-query); not checking packages. Needed:"
  echo "  ${required[*]}"
  exit 0
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# The archive has a candidate version for the package (after apt-get update).
available() { apt-cache policy "$1" 2>/dev/null | grep -q 'Candidate: [^(]'; }

missing_required=()
for p in "${required[@]}"; do installed "$p" || missing_required+=("$p"); done
missing_optional=()
for p in "${optional[@]}"; do installed "$p" || missing_optional+=("$p"); done

if [ ${#missing_required[@]} -eq 0 ] && [ ${#missing_optional[@]} -eq 0 ]; then
  echo "setup: all required and optional packages are installed"
  exit 0
fi

is_root=0
[ "$(id -u)" = 0 ] && is_root=1
# Another apt-get running (a bench script installing its peers) holds dpkg's lock: wait for it
# rather than build without the optional components.
apt_get() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }

if [ ${#missing_required[@]} -gt 0 ]; then
  if [ $is_root = 0 ]; then
    echo "setup: missing required packages: ${missing_required[*]}" >&2
    echo "setup: install them with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing_required[*]}" >&2
    exit 1
  fi
  echo "setup: installing required packages: ${missing_required[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt_get update || { echo "setup: apt-get update failed" >&2; exit 1; }
  extra=()
  for p in "${missing_optional[@]}"; do available "$p" && extra+=("$p"); done
  if ! apt_get install -y --no-install-recommends "${missing_required[@]}" "${extra[@]}"; then
    echo "setup: apt-get install failed; the build needs: ${missing_required[*]}" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$stamp")" && touch "$stamp"
elif [ $is_root = 1 ] && [ ! -e "$stamp" ]; then
  export DEBIAN_FRONTEND=noninteractive
  mkdir -p "$(dirname "$stamp")" && touch "$stamp"
  if apt_get update >/dev/null 2>&1; then
    extra=()
    for p in "${missing_optional[@]}"; do available "$p" && extra+=("$p"); done
    if [ ${#extra[@]} -gt 0 ]; then
      echo "setup: installing optional packages: ${extra[*]}"
      apt_get install -y --no-install-recommends "${extra[@]}" || echo "setup: could not install ${extra[*]}; continuing without"
    fi
  else
    echo "setup: apt-get update failed (offline?); optional packages stay missing"
  fi
fi

still=()
for p in "${optional[@]}"; do installed "$p" || still+=("$p"); done
if [ ${#still[@]} -gt 0 ]; then
  echo "setup: optional packages not installed (their components are off): ${still[*]}"
  [ $is_root = 0 ] && echo "setup: to add them: sudo apt-get install -y ${still[*]}"
fi
echo "setup: required packages are installed"
exit 0
