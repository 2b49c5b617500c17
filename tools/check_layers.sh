#!/usr/bin/env bash
# Fails when an #include between engine/src directories breaks the layer order that
# ARCHITECTURE.md's ```layers block states (a directory includes its own headers and
# those of the directories listed after it). The ground floor of the public API
# (petrel/types.h, status.h, export.h) is open to every directory; the rest of
# petrel/*.h and the top's own headers (model_access.h) to the top (files directly in
# engine/src) only.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A allowed
in_block=false
while IFS= read -r line; do
  if [[ "$line" == '```layers' ]]; then in_block=true; continue; fi
  $in_block || continue
  [[ "$line" == '```' ]] && break
  name=${line%%:*}
  allowed[$name]=" $name ${line#*:} "
done < ARCHITECTURE.md
[[ ${#allowed[@]} -gt 0 ]] || { echo "check_layers: no \`\`\`layers block in ARCHITECTURE.md" >&2; exit 1; }

bad=0
while IFS= read -r file; do
  rel=${file#engine/src/}
  if [[ "$rel" == */* ]]; then layer=${rel%%/*}; else layer=top; fi
  if [[ -z "${allowed[$layer]+x}" ]]; then
    echo "$file: directory '$layer' is not in ARCHITECTURE.md's layers block" >&2
    bad=1
    continue
  fi
  while IFS=: read -r lineno target; do
    ok=false
    case "$target" in
      petrel/types.h | petrel/status.h | petrel/export.h) ok=true ;;
      petrel/*) [[ $layer == top ]] && ok=true ;;
      petrel_generated.h) [[ $layer == format ]] && ok=true ;;  # the schema's generated reader
      */*) [[ "${allowed[$layer]}" == *" ${target%%/*} "* ]] && ok=true ;;
      *) [[ $layer == top && -f engine/src/$target ]] && ok=true ;;  # the top's own headers (model_access.h)
    esac
    if ! $ok; then
      echo "$file:$lineno: '$layer' may not include \"$target\" (ARCHITECTURE.md, layers)" >&2
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p;t;s/.*//p' "$file" |
           awk 'NF { print NR ":" $0 }')
done < <(find engine/src -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.inc' \) | sort)

if [[ $bad -ne 0 ]]; then exit 1; fi
echo "check_layers: every #include in engine/src follows ARCHITECTURE.md's layer order"
