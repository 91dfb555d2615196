#!/usr/bin/env bash
# braid as outside projects use it, on the compiler's default C++ standard: installs the build
# into a scratch prefix, then builds and runs (a) examples/minimal and (b) the README's program
# against it with find_package, and (c) configures the README's add_subdirectory(braid) project
# and compiles the program there (building libbraid again is left out: minutes on CI's cores;
# with BRAID_PACKAGE_LINK_SUBDIR=1 it builds libbraid there too, links the program and runs it).
#   package_test.sh --source DIR --build DIR --work DIR --cmake CMAKE --generator GEN
#                   --cxx COMPILER [--launcher LAUNCHER]
set -euo pipefail
me=package_test.sh
launcher=""
link_subdir=${BRAID_PACKAGE_LINK_SUBDIR:-0}
while [ $# -gt 0 ]; do
  case $1 in
    --source) source_dir=$2 ;;
    --build) build_dir=$2 ;;
    --work) work=$2 ;;
    --cmake) cmake=$2 ;;
    --generator) generator=$2 ;;
    --cxx) cxx=$2 ;;
    --launcher) launcher=$2 ;;
    *) echo "$me: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
fail() { echo "$me: FAILED: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

# readme_block KEY: the fenced block after the line "<!-- package-test: KEY -->" in README.md,
# exactly as printed. The marker must appear once and a fence must follow it directly.
readme_block() {
  local key=$1 count
  count=$(grep -cxF -- "<!-- package-test: $key -->" "$source_dir/README.md" || true)
  [ "$count" = 1 ] || fail "README.md has $count markers '<!-- package-test: $key -->' (want 1)"
  awk -v marker="<!-- package-test: $key -->" '
    state == 0 && $0 == marker { state = 1; next }
    state == 1 { if ($0 !~ /^```[a-z]+$/) exit 3; state = 2; next }
    state == 2 && $0 == "```" { done = 1; exit }
    state == 2 { print }
    END { if (!done) exit 3 }' "$source_dir/README.md" ||
    fail "README.md: no fenced block right after '<!-- package-test: $key -->'"
}

# configure NAME SOURCE [ARGS...]: an outside project on the compiler's defaults (no build type,
# no C++ standard), with this build's compiler and generator.
configure() {
  local name=$1 src=$2
  shift 2
  "$cmake" -S "$src" -B "$work/$name" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
    ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher"} "$@" >"$work/$name.configure.log" 2>&1 ||
    { cat "$work/$name.configure.log" >&2; fail "$name: configure (log above)"; }
}

# build NAME TARGET: builds one target of a configured project.
build() {
  "$cmake" --build "$work/$1" --target "$2" >"$work/$1.build.log" 2>&1 ||
    { cat "$work/$1.build.log" >&2; fail "$1: building $2 (log above)"; }
}

# run_training NAME PROGRAM: runs it; it must exit 0 and print finite losses ("loss <number>"),
# the last below the first.
run_training() {
  local name=$1 program=$2 rc=0
  "$program" >"$work/$name.out" 2>&1 || rc=$?
  [ "$rc" = 0 ] || { cat "$work/$name.out" >&2; fail "$name: $program exited $rc"; }
  awk '{ for (i = 1; i < NF; ++i) if ($i == "loss") {
           if ($(i + 1) !~ /^-?[0-9]+(\.[0-9]+)?$/) { bad = $(i + 1); exit }
           if (n++ == 0) first = $(i + 1); last = $(i + 1) } }
       END { if (bad != "") { print "non-finite loss " bad; exit 1 }
             if (n == 0) { print "no loss printed"; exit 1 }
             if (n > 1 && last + 0 >= first + 0) {
               print "loss did not fall: " first " -> " last; exit 1 }
             print n " losses, " first " -> " last }' "$work/$name.out" >"$work/$name.check" ||
    { cat "$work/$name.out" >&2; fail "$name: $(cat "$work/$name.check")"; }
  echo "$me: $name: ran, $(cat "$work/$name.check")"
}

"$cmake" --install "$build_dir" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2
    fail "cmake --install $build_dir (log above; it installs what the build made: build braid" \
         "and, with NCCL, braid_nccl first)"; }
[ -f "$prefix/lib/cmake/braid/braidConfig.cmake" ] &&
  [ -f "$prefix/lib/cmake/braid/braidConfigVersion.cmake" ] ||
  fail "the install lacks lib/cmake/braid/braidConfig.cmake or braidConfigVersion.cmake"
echo "$me: installed into $prefix"

# (a) examples/minimal with its own CMakeLists.txt.
configure minimal "$source_dir/examples/minimal" -DCMAKE_PREFIX_PATH="$prefix"
build minimal minimal_train
run_training minimal "$work/minimal/minimal_train"

# (b) the README's program and find_package lines.
mkdir -p "$work/readme-src"
readme_block "main.cpp" >"$work/readme-src/main.cpp"
readme_block "CMakeLists.txt find_package" >"$work/readme-src/CMakeLists.txt"
configure readme "$work/readme-src" -DCMAKE_PREFIX_PATH="$prefix"
build readme app
run_training readme "$work/readme/app"

# (c) the README's add_subdirectory lines, braid's source tree as ./braid.
mkdir -p "$work/subdir-src"
cp "$work/readme-src/main.cpp" "$work/subdir-src/main.cpp"
readme_block "CMakeLists.txt add_subdirectory" >"$work/subdir-src/CMakeLists.txt"
ln -s "$source_dir" "$work/subdir-src/braid"
configure subdir "$work/subdir-src"
case $generator in
  Ninja*) object=CMakeFiles/app.dir/main.cpp.o ;;
  *) object=main.cpp.o ;;
esac
if [ "$link_subdir" = 1 ]; then
  build subdir app
  run_training subdir "$work/subdir/app"
else
  build subdir "$object"
  echo "$me: subdir: configured with add_subdirectory(braid) and compiled main.cpp"
fi
echo "$me: ok"
