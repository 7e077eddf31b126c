#!/usr/bin/env bash
# A small lit runner: executes each `// RUN:` (or `# RUN:`) line of a test file with bash,
# pipefail on. Substitutions: %s the file, %t a fresh temporary path, %data the shared test data
# folder (tests/error/data); the words fusebox, FileCheck and not name the tools under test.
# Usage: run_lit.sh FILE FUSEBOX FILECHECK NOT DATA_DIR
set -u
file=$1 fusebox=$2 filecheck=$3 not=$4 data=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

runs=()
current=""
while IFS= read -r line; do
  if [[ $line =~ ^[[:space:]]*(//|#)[[:space:]]*RUN:[[:space:]]?(.*)$ ]]; then
    part=${BASH_REMATCH[2]}
    if [[ $part == *'\' ]]; then
      current+="${part%\\} "
      continue
    fi
    runs+=("$current$part")
    current=""
  fi
done < "$file"

if [ ${#runs[@]} -eq 0 ]; then
  echo "run_lit: $file has no RUN line" >&2
  exit 1
fi

n=0
for cmd in "${runs[@]}"; do
  n=$((n + 1))
  cmd=${cmd//%s/$file}
  cmd=${cmd//%t/$tmp/t$n}
  cmd=${cmd//%data/$data}
  # Replace tool names only where they stand as words.
  cmd=$(printf '%s' "$cmd" | sed -E "s#(^|[|;&(] *|not +|=[^ ]* +)fusebox( |\$)#\1$fusebox\2#g; s#(^|[|;&(] *)not #\1$not #g; s#(^|[|;&(] *)FileCheck #\1$filecheck #g; s#(^|[|;&(] *)FileCheck\$#\1$filecheck#g")
  echo "RUN[$n]: $cmd"
  if ! (cd "$tmp" && bash -o pipefail -c "$cmd"); then
    echo "run_lit: RUN line $n of $file failed" >&2
    exit 1
  fi
done
echo "run_lit: $n RUN line(s) passed"
