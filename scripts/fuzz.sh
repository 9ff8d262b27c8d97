#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ (or the ones named) for a while and
# records what each did: executions, crashes (a crash, a leak, a timeout or
# running out of memory all count), corpus size, peak memory.
#
#   scripts/fuzz.sh                        # every target, 10 s each (CI's run)
#   FUZZ_SECONDS=600 scripts/fuzz.sh       # a campaign
#   scripts/fuzz.sh nf_process spec_load   # some targets
#   FUZZ_JSON=out.json scripts/fuzz.sh     # also one JSON object per target
#   FUZZ_TARGET_DIR=/tmp/ft scripts/fuzz.sh  # build elsewhere (default fuzz/target)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`); the stable toolchain does
# with RUSTC_BOOTSTRAP=1 (cargo-fuzz passes nightly-only flags such as
# -Zsanitizer=address). Without cargo-fuzz it says so and skips. The
# corpus grows in fuzz/corpus/<target> (not committed); a failing input
# goes to fuzz/artifacts/<target>/ and the script exits non-zero. Once
# fixed, copy it into fuzz/regressions/<target>/ (committed; replayed on
# every run).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-10}"
json="${FUZZ_JSON:-}"
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "note: cargo-fuzz is not installed (cargo install cargo-fuzz); skipping the fuzz targets"
  exit 0
fi

export RUSTC_BOOTSTRAP=1
# Its own target directory: cargo-fuzz's flags differ from the workspace
# build's, so sharing one would rebuild everything both ways.
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/fuzz/target}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi
echo "fuzz: building ${#targets[@]} targets"
build_log=$(mktemp "${TMPDIR:-/tmp}/sluice-fuzz-build.XXXXXX")
if ! cargo fuzz build >"$build_log" 2>&1; then
  cat "$build_log"
  exit 1
fi
rm -f "$build_log"
bin_dir="$CARGO_TARGET_DIR/$(rustc -vV | sed -n 's/^host: //p')/release"

# Seeds: the examples for the spec loader; the same specs wrapped as
# `PUT /v1/spec` bodies (selector byte 0) for the API target.
seeds=$(mktemp -d "${TMPDIR:-/tmp}/sluice-fuzz-seeds.XXXXXX")
trap 'rm -rf "$seeds"' EXIT
mkdir -p "$seeds/spec_load" "$seeds/api_request"
cp examples/*.yaml "$seeds/spec_load/"
for f in examples/*.yaml; do
  python3 - "$f" > "$seeds/api_request/$(basename "$f").json" <<'EOF'
import json, sys
sys.stdout.write("\0" + json.dumps({"spec": open(sys.argv[1]).read(), "dry_run": True}))
EOF
done

[ -n "$json" ] && : > "$json"
failed=0
printf '%-20s %12s %10s %8s %8s %s\n' target executions exec/s corpus rss_mb result
for t in "${targets[@]}"; do
  corpus="fuzz/corpus/$t"
  artifacts="fuzz/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  log=$(mktemp "${TMPDIR:-/tmp}/sluice-fuzz-$t.XXXXXX")
  dirs=("$corpus")
  [ -d "$seeds/$t" ] && dirs+=("$seeds/$t")
  # Inputs that once failed (committed): replayed first on every run, so a
  # bug fixed stays fixed whatever the random search explores this time.
  [ -d "fuzz/regressions/$t" ] && dirs+=("fuzz/regressions/$t")
  set +e
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb: libFuzzer's
  # default 2 GiB, stated.
  "$bin_dir/$t" "${dirs[@]}" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  size=$(find "$corpus" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    result=ok crashes=0
  else
    result="FAILED (exit $rc)" crashes=1 failed=1
  fi
  printf '%-20s %12s %10s %8s %8s %s\n' "$t" "${runs:-?}" "${rate:-?}" "$size" "${rss:-?}" "$result"
  if [ "$rc" -ne 0 ]; then
    echo "---- $t: the end of libFuzzer's report ($log)"
    tail -40 "$log"
    echo "---- reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run $t $artifacts/<file>"
  else
    rm -f "$log"
  fi
  if [ -n "$json" ]; then
    printf '{"target":"%s","seconds":%s,"executions":%s,"exec_per_sec":%s,"corpus":%s,"peak_rss_mb":%s,"crashes":%s}\n' \
      "$t" "$seconds" "${runs:-0}" "${rate:-0}" "$size" "${rss:-0}" "$crashes" >>"$json"
  fi
done
exit "$failed"
