#!/usr/bin/env bash
# Installs a Petrel build into a fresh prefix, then builds the apps in examples/ as a
# separate project against it (CMake package: shared and static; pkg-config: C) and
# checks that each translates the demo model exactly as the installed petrel-run does.
#   install_and_consume.sh BUILD_DIR SOURCE_DIR WORK_DIR [TOOLCHAIN_FILE EMULATOR...]
# With a toolchain file the apps are cross-compiled the same way and run (like the
# installed tools) through the emulator; the pkg-config build is native only.
set -euo pipefail
build=$1 source=$2 work=$3
toolchain=${4:-}
emulator=("${@:5}")
prefix=$work/prefix
rm -rf "$work" && mkdir -p "$work"

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/petrel/petrel.h include/petrel/translator.h bin/petrel-convert bin/petrel-run; do
  [[ -e $prefix/$f ]] || { echo "not installed: $f" >&2; exit 1; }
done
compgen -G "$prefix/lib*/libpetrel.a" >/dev/null || compgen -G "$prefix/lib*/*/libpetrel.a" >/dev/null ||
  { echo "not installed: libpetrel.a" >&2; exit 1; }

model=$work/numbers.petrel
"${emulator[@]}" "$prefix/bin/petrel-convert" "$source/tools/demo-model" -o "$model" >/dev/null

# The inputs, and what the installed petrel-run makes of them: the expected output.
inputs=(7 42 1007 4096 80808 250017 999999 13)
printf '%s\n' "${inputs[@]}" >"$work/input.txt"
run_args=()
for i in "${inputs[@]}"; do run_args+=(--text "$i"); done
"${emulator[@]}" "$prefix/bin/petrel-run" "$model" "${run_args[@]}" 2>/dev/null |
  sed -E 's/^.* -> (.*)\t\(score .*$/\1/' >"$work/expected.txt"
[[ $(wc -l <"$work/expected.txt") -eq ${#inputs[@]} ]] || { echo "petrel-run gave no translations" >&2; exit 1; }

cmake -S "$source/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  ${toolchain:+-DCMAKE_TOOLCHAIN_FILE="$toolchain"} >/dev/null
cmake --build "$work/examples" -j2 >/dev/null

if [[ -z $toolchain ]]; then
  # pkg-config: the C example compiled by hand, as a Makefile-based app would.
  pkg_config_path=$(dirname "$(find "$prefix" -name petrel.pc)")
  export PKG_CONFIG_PATH=$pkg_config_path
  cc -std=c99 -Wall -Wextra -Werror "$source/examples/translate.c" -o "$work/translate_pkgconfig" \
    $(pkg-config --cflags --libs petrel) -Wl,-rpath,"$(pkg-config --variable=libdir petrel)"
fi

check() {
  local name=$1
  shift
  "${emulator[@]}" "$@" "$model" <"$work/input.txt" >"$work/$name.txt"
  if ! diff -u "$work/expected.txt" "$work/$name.txt"; then
    echo "FAIL: $name differs from petrel-run" >&2
    exit 1
  fi
  echo "ok: $name (${#inputs[@]} lines)"
}
check c_shared "$work/examples/translate"
check c_static "$work/examples/translate_static"
check cpp "$work/examples/translate_cpp"
[[ -n $toolchain ]] || check c_pkgconfig "$work/translate_pkgconfig"

# The static app must not need libpetrel.so; the shared one must.
needs_libpetrel() { readelf -d "$1" | grep NEEDED | grep -q libpetrel; }
! needs_libpetrel "$work/examples/translate_static" || { echo "static app needs libpetrel.so" >&2; exit 1; }
needs_libpetrel "$work/examples/translate" || { echo "shared app does not need libpetrel.so" >&2; exit 1; }

# Errors reach the C caller as a code and a message naming the problem.
if echo "4a2" | "${emulator[@]}" "$work/examples/translate" "$model" >/dev/null 2>"$work/error.txt"; then
  echo "FAIL: an unencodable line succeeded" >&2
  exit 1
fi
grep -q "4a2" "$work/error.txt" || { echo "FAIL: error does not name the input:" >&2; cat "$work/error.txt" >&2; exit 1; }
echo "ok: errors reach the C app ($(cat "$work/error.txt"))"
