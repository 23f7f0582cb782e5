#!/usr/bin/env bash
# Builds the libFuzzer target for the HTTP request parser (with AddressSanitizer) and runs
# it. Usage: scripts/fuzz.sh [seconds=600]. Needs libclang-rt-14-dev (apt).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-600}
OUT=.build-fuzz
mkdir -p "$OUT" "$OUT/corpus"
SOURCES=(Sources/HTTPCore/Parsing/*.swift Sources/HTTPCore/HTTPHeaders.swift Sources/HTTPCore/HTTPStatus.swift
         Sources/HTTPCore/HTTPVersion.swift Sources/HTTPCore/PercentEncoding.swift Fuzz/RequestParserFuzz/FuzzMain.swift)
swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name HTTPCoreFuzz "${SOURCES[@]}" -o "$OUT/request-parser-fuzz"
cp -n Fuzz/corpus/* "$OUT/corpus/" 2>/dev/null || true
"$OUT/request-parser-fuzz" -max_len=4096 -timeout=5 -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1 "$OUT/corpus" 2>&1 | tail -25
