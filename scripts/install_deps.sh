#!/usr/bin/env bash
# Installs the Debian packages braid needs, only those missing; quick when all are present.
#   scripts/install_deps.sh [build|test|train|bench|all]   (default: all)
set -euo pipefail

what=${1:-all}
build_pkgs=(build-essential cmake pkg-config libopenblas-openmp-dev libdnnl-dev libprotobuf-dev
            protobuf-compiler libspdlog-dev libfmt-dev nlohmann-json3-dev libgtest-dev
            libgmock-dev libbenchmark-dev openmpi-bin libopenmpi-dev)
data_pkgs=(bible-kjv npm)
# tools/braid-plot's loss curves (pretrain.sh draws loss.png; its ctest checks the PNG).
plot_pkgs=(python3-matplotlib)
# The PyTorch reference side of benchmarks/cpu_vs_torch.sh (and the fixture generators).
bench_pkgs=(python3-torch python3-numpy)

case "$what" in
  build) wanted=("${build_pkgs[@]}") ;;
  test|train) wanted=("${build_pkgs[@]}" "${data_pkgs[@]}" "${plot_pkgs[@]}") ;;
  bench) wanted=("${build_pkgs[@]}" "${bench_pkgs[@]}") ;;
  all) wanted=("${build_pkgs[@]}" "${data_pkgs[@]}" "${plot_pkgs[@]}" "${bench_pkgs[@]}") ;;
  *) echo "install_deps.sh: unknown set '$what' (expected build, test, train, bench or all)" >&2; exit 2 ;;
esac

missing=()
for pkg in "${wanted[@]}"; do
  # npm may come with a non-Debian Node.js install; accept a working npm on PATH.
  if [ "$pkg" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install_deps.sh: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install_deps.sh: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
