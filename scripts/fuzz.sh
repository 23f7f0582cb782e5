#!/usr/bin/env bash
# Builds a libFuzzer target (with AddressSanitizer) and runs it.
# Usage: scripts/fuzz.sh [seconds=600] [request|response]. Needs libclang-rt-14-dev (apt) for
# the fuzzer runtime.
#   request:  the server's HTTP request parser (HTTPCore); seeds in Fuzz/corpus (llhttp cases
#             with Host added, plus hand-written requests).
#   response: the outbound client's response parser (HTTPClient's ResponseParser, what
#             upstreams send back); seeds in Fuzz/response-corpus (first byte: GET or HEAD).
# Each parser is compiled from its own sources (no package build); what the fuzzer finds
# accumulates in .build-fuzz/<target>-corpus; crashes land in .build-fuzz/<target>-crash-*.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-600}
TARGET=${2:-request}
OUT=.build-fuzz
mkdir -p "$OUT/$TARGET-corpus"
# (gold warns once per ASan helper symbol that it "cannot export local symbol": harmless, filtered.)
quiet() { { "$@" 2>&1; } | { grep -v 'Cannot export local symbol' || true; }; }
case "$TARGET" in
  request)
    SEEDS=Fuzz/corpus; MAX_LEN=4096
    quiet swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name HTTPCoreFuzz -package-name fuzz \
      Sources/HTTPCore/Parsing/*.swift Sources/HTTPCore/HTTPHeaders.swift Sources/HTTPCore/HTTPStatus.swift \
      Sources/HTTPCore/HTTPVersion.swift Sources/HTTPCore/PercentEncoding.swift Fuzz/RequestParserFuzz/FuzzMain.swift \
      -o "$OUT/request-fuzz" ;;
  response)
    SEEDS=Fuzz/response-corpus; MAX_LEN=8192
    # The HTTPCore files the parser uses (ASCII case-insensitive comparison, byte classes),
    # as a module of one package with it (ByteClass is package-visible).
    mkdir -p "$OUT/modules"
    quiet swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name HTTPCore -package-name fuzz -emit-module -emit-library -static \
      -emit-module-path "$OUT/modules/HTTPCore.swiftmodule" Sources/HTTPCore/HTTPHeaders.swift Sources/HTTPCore/Parsing/ByteClass.swift -o "$OUT/modules/libHTTPCore.a"
    quiet swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name HTTPClientFuzz -package-name fuzz -I "$OUT/modules" \
      Sources/HTTPClient/Wire/ResponseParser.swift Sources/HTTPClient/HTTPClientError.swift \
      Fuzz/ResponseParserFuzz/FuzzMain.swift "$OUT/modules/libHTTPCore.a" -o "$OUT/response-fuzz" ;;
  *) echo "usage: scripts/fuzz.sh [seconds] [request|response]" >&2; exit 2 ;;
esac
echo "built $OUT/$TARGET-fuzz; fuzzing for ${SECONDS_TO_RUN}s"
set +e
"$OUT/$TARGET-fuzz" -max_len="$MAX_LEN" -timeout=5 -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1 \
    -artifact_prefix="$OUT/$TARGET-" "$OUT/$TARGET-corpus" "$SEEDS" > "$OUT/$TARGET-fuzz.log" 2>&1
status=$?
set -e
grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$OUT/$TARGET-fuzz.log" | tail -3
grep -E '^(stat::|Done|==[0-9]+==ERROR|SUMMARY|Fatal error|.*fatal error|artifact_prefix|Test unit written)' "$OUT/$TARGET-fuzz.log" || true
echo "libFuzzer exit status: $status (0: no crash)"
exit $status
