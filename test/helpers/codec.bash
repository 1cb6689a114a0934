# Helpers for the codec suites: small hand-written logs.
HDR='{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}'
# log FILE LINE… : writes a header then the given body lines
mklog() { local f=$1; shift; { printf '%s\n' "$HDR"; printf '%s\n' "$@"; } > "$f"; }
# a persisted text-delta event: seq time turn step index text
tdelta() { printf '{"type":"assistant/chunk","seq":%s,"time":%s,"data":{"turn":%s,"step":%s,"chunk":{"type":"text-delta","index":%s,"text":"%s"}}}' "$@"; }
