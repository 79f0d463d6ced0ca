#!/usr/bin/env bash
# Runs the benchmark set of BENCHMARKS.md on a GPU backend and writes every output to one folder.
#
#   scripts/gpu_bench.sh [cuda|wgpu] [OUT_DIR]
#
# Default backend: cuda if `nvidia-smi` works, else wgpu. Builds the benchmark examples in
# release with that backend's feature and burn's autotune, as users run on a card
# (AUTOTUNE=0: autotune off, as CI runs), then, for the MLP of
# PERFORMANCE_ANCHOR.md, the Cockpit paper's cifar10_3c3d, and the guide CNN, transformer, autoencoder and encoder–decoder of
# `examples/architectures.rs`: economy, business and full at every step with the histograms
# counted on the host and on the device. Each run prints `overhead`, `reads_per_step`,
# `values_read_per_step` and `kernels_per_step` lines; `summary.txt` collects them as each
# run ends (a run past TIMEOUT is stopped and the others go on). Copy the figures into
# BENCHMARKS.md with the GPU's name (`gpu.txt`).
#
# Environment: STEPS (default 30), REPEATS (default 3); TIMEOUT per run in seconds (default 900);
# AUTOTUNE (default 1).
#
# Precision: with autotune off, burn-cubecl's fixed matmul strategy on CUDA may take float32
# products through TF32 tensor cores (about 1e-3 relative error in the per-sample products);
# `gpu.txt` records which of the two ran, and the float64 reference checks
# (`cargo test --release --features <backend> --test integration cifar3c3d`) say whether the
# per-sample quantities hold at the card's precision.
set -euo pipefail

cd "$(dirname "$0")/.."
backend="${1:-}"
if [[ -z "$backend" ]]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
        backend=cuda
    else
        backend=wgpu
    fi
fi
case "$backend" in
    cuda | wgpu) ;;
    *)
        echo "usage: $0 [cuda|wgpu] [OUT_DIR]" >&2
        exit 2
        ;;
esac
# What the backend needs, said before anything is built.
missing=()
if [[ "$backend" == cuda ]]; then
    command -v nvcc >/dev/null 2>&1 || missing+=("nvcc (the CUDA toolkit)")
    if ! ldconfig -p 2>/dev/null | grep -q libnvrtc; then
        missing+=("libnvrtc (the CUDA runtime compiler library)")
    fi
    if ! nvidia-smi >/dev/null 2>&1; then missing+=("a working nvidia-smi (the NVIDIA driver)"); fi
else
    if ! command -v vulkaninfo >/dev/null 2>&1; then
        missing+=("vulkaninfo (package vulkan-tools) to check the adapter")
    elif ! vulkaninfo --summary 2>/dev/null | grep -E "deviceName" | grep -qv llvmpipe; then
        missing+=("a Vulkan adapter other than llvmpipe (only the CPU rasterizer was found)")
    fi
fi
if ((${#missing[@]})); then
    echo "cannot benchmark on $backend; missing:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    exit 1
fi
out="${2:-bench-$backend-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$out"
steps="${STEPS:-30}"
repeats="${REPEATS:-3}"
limit="${TIMEOUT:-900}"

{
    echo "backend $backend, $(date -u)"
    if [[ "$backend" == cuda ]]; then nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true; fi
    if command -v vulkaninfo >/dev/null 2>&1; then vulkaninfo --summary 2>/dev/null | grep -E "deviceName|driverName" || true; fi
    uname -a
    nproc
} >"$out/gpu.txt" 2>&1

features="$backend"
if [[ "${AUTOTUNE:-1}" != 0 ]]; then features="$backend,autotune"; fi
echo "autotune: $([[ "$features" == *autotune ]] && echo on || echo off) (features $features)" >>"$out/gpu.txt"
echo "building the benchmarks (release, --features $features) ..."
if ! cargo build --release --features "$features" --example overhead --example architectures \
    >"$out/build.txt" 2>&1; then
    echo "the build failed:" >&2
    grep -E -A 12 "^error" "$out/build.txt" >&2 || tail -n 40 "$out/build.txt" >&2
    exit 1
fi
tail -n 1 "$out/build.txt"
bin=target/release/examples
export BURN_COCKPIT_DEVICE="$backend"

run() {
    local name="$1"
    shift
    echo "== $name: $*"
    if ! timeout "$limit" "$@" >"$out/$name.txt" 2>&1; then
        echo "   (failed or timed out after ${limit}s; see $out/$name.txt)"
    fi
    grep -E "^(model|backend|plain|overhead|reads_per_step|values_read_per_step|kernels_per_step|hvp_products)" \
        "$out/$name.txt" | sed "s/^/$name: /" >>"$out/summary.txt" || true
}

configs=economy,economy_without_GradHist1d,business,full,GradHist1d,GradHist2d,HessMaxEV
for model in mlp 3c3d; do
    for histograms in host device; do
        run "overhead-$model-$histograms" "$bin/overhead" --model "$model" \
            --histograms "$histograms" --steps "$steps" --repeats "$repeats" --only "$configs"
    done
done
for histograms in host device; do
    run "architectures-$histograms" "$bin/architectures" --bench --no-exact --model all \
        --histograms "$histograms" --steps "$steps" --repeats "$repeats" --only economy,GradHist1d
done

echo "done: $out/summary.txt"
