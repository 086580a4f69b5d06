#!/usr/bin/env bash
# Packs a CUDA build for the GPU machine: the tandem binary, the test and bench binaries, and the
# shared libraries they need that a bare machine may lack.
#   scripts/bundle_cuda.sh [BUILD_DIR (default: build)] [OUT (default: build/bundle)]
# CUDA's own libraries (cuBLASLt alone is 540 MB) and the driver stay behind: the GPU
# machine has CUDA 13.0 in /usr/local/cuda/lib64. There, run a binary through the bundle's
# run.sh (e.g. `OUT/run.sh OUT/tests/test_backend_cuda`), which sets LD_LIBRARY_PATH.
set -euo pipefail
build=${1:-build}
out=${2:-build/bundle}
mkdir -p "$out/lib" "$out/tests" "$out/bench"
bins=()
if [ -x "$build/tandem" ]; then cp "$build/tandem" "$out/"; bins+=("$out/tandem"); fi
for t in "$build"/tests/test_*; do
  [ -f "$t" ] && [ -x "$t" ] || continue
  cp "$t" "$out/tests/"
  bins+=("$out/tests/$(basename "$t")")
done
for t in "$build"/bench/*; do
  [ -f "$t" ] && [ -x "$t" ] || continue
  cp "$t" "$out/bench/"
  bins+=("$out/bench/$(basename "$t")")
done
[ ${#bins[@]} -gt 0 ] || { echo "bundle_cuda: no binaries in $build" >&2; exit 1; }

strip "${bins[@]}"  # symbols would double what travels

# Present on every Linux machine, or provided by the GPU machine's CUDA and driver.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libcuda\.so|libcublas|libcudart|libnvrtc|libnvJitLink)'
for b in "${bins[@]}"; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] || cp -uL "$path" "$out/lib/$name"
  done
done

cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs a bundled binary with the bundled libraries and the machine's CUDA 13.0.
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$@"
RUN
chmod +x "$out/run.sh"
echo "bundle: $out ($(du -sh "$out" | cut -f1)): ${#bins[@]} binaries, libs: $(ls "$out/lib" | tr '\n' ' ')"
echo "on the GPU machine: export LD_LIBRARY_PATH=<bundle>/lib:/usr/local/cuda/lib64 (or use <bundle>/run.sh)"
