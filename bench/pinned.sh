#!/usr/bin/env bash
# pinned.sh runs the peer bench with the server and the client in
# processes of their own, each pinned to one CPU with GOMAXPROCS=1, so
# that the client's CPU time per call decides its throughput and the
# allocations counted are the client's alone:
#
#	bench/pinned.sh [bench flags]      e.g. bench/pinned.sh -rounds 7 -benchfmt run1.txt
#
# It builds the bench binary once, starts `bench -serve` on SERVER_CPU
# (default 1), runs `bench -target URL` on CLIENT_CPU (default 0) with the
# clients raw, hand-rolled, outbound and outbound-omit (a -clients flag
# among the arguments replaces them; every other flag passes through),
# and stops the server when it ends, however it ends.
set -euo pipefail

# The toolchain the module names (go.mod), unless the caller chose one.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

cd "$(dirname "$0")"
server_cpu=${SERVER_CPU:-1}
client_cpu=${CLIENT_CPU:-0}
tmp=$(mktemp -d)
server_pid=
client_pid=

stop() {
	for pid in $client_pid $server_pid; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap stop EXIT
trap 'exit 130' INT TERM

go build -o "$tmp/bench" .

echo "+ GOMAXPROCS=1 taskset -c $server_cpu bench -serve 127.0.0.1:0" >&2
GOMAXPROCS=1 taskset -c "$server_cpu" "$tmp/bench" -serve 127.0.0.1:0 >"$tmp/url" 2>"$tmp/server.log" &
server_pid=$!

# The server prints its URL as the first line of stdout once it listens.
for _ in $(seq 100); do
	if [[ -s $tmp/url ]] || ! kill -0 "$server_pid" 2>/dev/null; then
		break
	fi
	sleep 0.1
done
url=$(head -n 1 "$tmp/url")
if [[ -z $url ]]; then
	echo "pinned.sh: the bench server did not start:" >&2
	cat "$tmp/server.log" >&2
	exit 1
fi
cat "$tmp/server.log" >&2

echo "+ GOMAXPROCS=1 taskset -c $client_cpu bench -target $url -clients raw,hand-rolled,outbound,outbound-omit $*" >&2
# In the background and waited for, so that a signal to this script is
# handled at once rather than when the client is done.
GOMAXPROCS=1 taskset -c "$client_cpu" "$tmp/bench" -target "$url" \
	-clients raw,hand-rolled,outbound,outbound-omit "$@" &
client_pid=$!
status=0
wait "$client_pid" || status=$?
client_pid=
exit "$status"
