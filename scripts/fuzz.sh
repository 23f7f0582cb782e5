#!/usr/bin/env bash
# Builds the libFuzzer target for the HTTP request parser (with AddressSanitizer) and runs it.
# Usage: scripts/fuzz.sh [seconds=600]. Needs libclang-rt-14-dev (apt) for the fuzzer runtime.
# The parser is compiled from its own sources (no package build); the seed corpus is
# Fuzz/corpus (llhttp cases with Host added, plus hand-written requests); what the fuzzer
# finds accumulates in .build-fuzz/corpus; crashes land in .build-fuzz/crash-*.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-600}
OUT=.build-fuzz
mkdir -p "$OUT/corpus"
SOURCES=(Sources/HTTPCore/Parsing/*.swift Sources/HTTPCore/HTTPHeaders.swift Sources/HTTPCore/HTTPStatus.swift
         Sources/HTTPCore/HTTPVersion.swift Sources/HTTPCore/PercentEncoding.swift Fuzz/RequestParserFuzz/FuzzMain.swift)
# (gold warns once per ASan helper symbol that it "cannot export local symbol": harmless, filtered.)
{ swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name HTTPCoreFuzz "${SOURCES[@]}" \
    -o "$OUT/request-parser-fuzz" 2>&1; } | { grep -v 'Cannot export local symbol' || true; }
echo "built $OUT/request-parser-fuzz; fuzzing for ${SECONDS_TO_RUN}s"
set +e
"$OUT/request-parser-fuzz" -max_len=4096 -timeout=5 -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1 \
    -artifact_prefix="$OUT/" "$OUT/corpus" Fuzz/corpus > "$OUT/fuzz.log" 2>&1
status=$?
set -e
grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$OUT/fuzz.log" | tail -3
grep -E '^(stat::|Done|==[0-9]+==ERROR|SUMMARY|Fatal error|.*fatal error|artifact_prefix|Test unit written)' "$OUT/fuzz.log" || true
echo "libFuzzer exit status: $status (0: no crash)"
exit $status
