#!/usr/bin/env bash
# The README's main command: install what is missing, build, convert the bundled
# English -> German model (trained here on the human translations of Debian's gettext
# catalogs: tools/en-de-model/README.md), describe it, and translate real software
# messages it has never seen (from its test split) plus a few of our own.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
cmake --preset tools >/dev/null
cmake --build --preset tools -j"$(nproc)" >/dev/null
bin=build/tools/tools
mkdir -p build/demo

echo "== petrel-convert tools/en-de-model -o build/demo/en-de.petrel   (int8, scales folded, tokenizer inside)"
"$bin/petrel-convert" tools/en-de-model -o build/demo/en-de.petrel | tail -n 4
echo
echo "== petrel-inspect build/demo/en-de.petrel --no-tensors"
"$bin/petrel-inspect" build/demo/en-de.petrel --no-tensors | head -n 13
echo
echo "== petrel-run build/demo/en-de.petrel --text ...   (the checkpoint's own settings: beam 4)"
"$bin/petrel-run" build/demo/en-de.petrel \
  --text "You need to specify a command." \
  --text "Unable to correct missing packages." \
  --text "This software can be controlled via voice input." \
  --text "If a FILE is '-' or missing, read standard input." \
  --text "The file could not be saved." \
  --text "Do you want to delete this folder?"
echo
echo "== the same through standard input, one line each:  printf '...' | petrel-run build/demo/en-de.petrel"
printf 'Open file\nPrint the document\nNetwork connection failed\n' | "$bin/petrel-run" build/demo/en-de.petrel
