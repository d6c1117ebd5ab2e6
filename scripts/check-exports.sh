#!/usr/bin/env bash
# Checks the shared library's exports against the public header and the
# export map:
# - the exported functions are exactly those declared GPR_API in the
#   header (no internal gpr__ symbol, nothing missing);
# - each carries a version node, and the map lists each by name (no
#   wildcard), in one node;
# - the map's last node is the header's GPR_VERSION_MAJOR.MINOR, so a
#   version bump comes with its node.
# Usage: check-exports.sh LIB HEADER MAP
set -euo pipefail
lib=$1 header=$2 map=${3:-src/libgpureclaim.map}
fail() { echo "check-exports: $*" >&2; exit 1; }

exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -oE '^GPR_API[^(]*\b(gpr_[a-z0-9_]+)\(' "$header" | grep -oE 'gpr_[a-z0-9_]+\($' | tr -d '(' | sort -u)
if [ "$exported" != "$declared" ]; then
  echo "exported symbols differ from the header's GPR_API functions:" >&2
  diff <(echo "$declared") <(echo "$exported") >&2 || true
  exit 1
fi

unversioned=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ && $3 !~ /@@?GPURECLAIM_[0-9]+\.[0-9]+$/ {print $3}')
[ -z "$unversioned" ] || fail "exported without a version node: $unversioned"

# the map without comments: its nodes and the names each lists
body=$(sed -e 's#/\*.*\*/##' -e '/\/\*/,/\*\//d' "$map")
grep -qE '^[[:space:]]*gpr_\*' <<<"$body" && fail "$map exports by wildcard"
listed=$(grep -oE '^[[:space:]]*gpr_[a-z0-9_]+;' <<<"$body" | tr -d ' \t;' | sort)
dups=$(uniq -d <<<"$listed")
[ -z "$dups" ] || fail "$map lists these in more than one node: $dups"
if [ "$(uniq <<<"$listed")" != "$declared" ]; then
  echo "check-exports: $map lists other functions than the header:" >&2
  diff <(echo "$declared") <(uniq <<<"$listed") >&2 || true
  exit 1
fi

major=$(awk '$1 == "#define" && $2 == "GPR_VERSION_MAJOR" {print $3}' "$header")
minor=$(awk '$1 == "#define" && $2 == "GPR_VERSION_MINOR" {print $3}' "$header")
last=$(grep -oE '^GPURECLAIM_[0-9]+\.[0-9]+' <<<"$body" | tail -1)
[ "$last" = "GPURECLAIM_$major.$minor" ] ||
  fail "the header says $major.$minor but the map's last node is $last"

echo "exports: $(echo "$exported" | wc -l) gpr_* functions, as declared, in" \
  "$(grep -cE '^GPURECLAIM_' <<<"$body") version nodes up to $last"
