#!/usr/bin/env bash
# Checks that a shared library exports exactly the gpr_* functions declared
# GPR_API in the public header: no internal gpr__ symbol, nothing missing.
set -euo pipefail
lib=$1 header=$2
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -oE '^GPR_API[^(]*\b(gpr_[a-z0-9_]+)\(' "$header" | grep -oE 'gpr_[a-z0-9_]+\($' | tr -d '(' | sort -u)
if [ "$exported" != "$declared" ]; then
  echo "exported symbols differ from the header's GPR_API functions:" >&2
  diff <(echo "$declared") <(echo "$exported") >&2 || true
  exit 1
fi
echo "exports: $(echo "$exported" | wc -l) gpr_* functions, as declared"
