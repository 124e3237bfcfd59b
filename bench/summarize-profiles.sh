#!/bin/sh
# summarize-profiles.sh DIR: for each *.perf.data in DIR (vigil-bench
# -profile -out OUT writes them to OUT/profiles), the share of the
# process's CPU samples spent under each part of the request path. Shares
# are inclusive (a part's callees count in it), so parts overlap. A part is
# the symbols whose names end in one of its ;-separated suffixes.
set -e
parts='
handler: worker Generate (host)|endpoint.(*Server).Generate
handler: plugin Generate (adapter)|sdk.(*engineServer).Generate
receive from the adapter (host)|sdk/internal/pluginv1.GenerateResponse]).Recv
receive from the engine (adapter)|pb.GenerateResponse]).Recv;pb.GenerateStreamResponse]).Recv
send to the client (host)|proto/vigil/worker/v1.GenerateResponse]).Send
send to the host (adapter)|sdk/internal/pluginv1.GenerateResponse]).Send
proto unmarshal|google.golang.org/protobuf/proto.Unmarshal
proto marshal|google.golang.org/grpc/encoding/proto.(*codecV2).Marshal
transport readers (frames in)|(*http2Client).reader;(*http2Server).HandleStreams
loopy writers (frames out)|(*loopyWriter).run
TLS (plugin connection)|crypto/tls.(*Conn).Read;crypto/tls.(*Conn).Write
memory allocation|runtime.mallocgc
garbage collection|runtime.gcBgMarkWorker;runtime.gcDrainN;runtime.bgsweep
scheduler (finding work, parking threads)|runtime.schedule
sysmon|runtime.sysmon
'
for data in "$1"/*.perf.data; do
	echo "## $(basename "$data" .perf.data)"
	report=$(perf report -i "$data" --stdio --children --sort symbol -g none 2>/dev/null)
	echo "$report" | grep '^# Samples' || true
	echo "$parts" | while IFS='|' read -r name pats; do
		[ -n "$name" ] || continue
		pct=$(echo "$report" | awk -v pats="$pats" '
			BEGIN { n = split(pats, p, ";") }
			$1 ~ /^[0-9.]+%$/ && $3 == "[.]" {
				sym = $4; for (i = 5; i <= NF; i++) if ($i != "-") sym = sym " " $i
				for (j = 1; j <= n; j++) {
					l = length(p[j])
					if (length(sym) >= l && substr(sym, length(sym) - l + 1) == p[j]) { s += $1; break }
				}
			}
			END { printf "%.1f", s }')
		[ "$pct" = 0.0 ] || printf '%-45s %5s%%\n' "$name" "$pct"
	done
	echo
done
