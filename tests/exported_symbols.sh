#!/usr/bin/env bash
# libpetrel.so exports the public API (engine/include/petrel/) and nothing else:
# every exported symbol is a petrel_* C function or in namespace petrel, and none
# names an engine internal (detail::, Impl, kernels, layers, models, decode, ...).
#   exported_symbols.sh NM LIBPETREL_SO
set -euo pipefail
nm_tool=$1 library=$2
symbols=$("$nm_tool" -DC --defined-only "$library" | awk '$2 != "A" { $1 = ""; $2 = ""; sub(/^ +/, ""); print }')
bad=$(grep -vE '^petrel_[a-z_0-9]+$|^petrel::' <<<"$symbols" || true)
bad+=$(grep -E 'detail::|::Impl|petrel::(kernels|layers|models|decode|text|threads|format)::' <<<"$symbols" || true)
if [[ -n "$bad" ]]; then
  echo "libpetrel.so exports more than the public API:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "libpetrel.so exports $(wc -l <<<"$symbols") symbols, all of the public API:"
echo "$symbols"
