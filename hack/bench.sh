#!/usr/bin/env bash
# make bench: the upgrade server against nginx, on loopback, with the same
# files, the same ECDSA P-256 certificate and the same load generator (wrk)
# in one run. Prints ratios project/nginx; higher is better for the
# operator. Installs nginx, wrk and minisign from Debian if missing.
#
# BENCH_DURATION (8s) is each wrk run; BENCH_ROUNDS (5) is how many
# alternating operator/nginx runs the listing gets, reported as their
# median ratio. BENCH_PROFILE=1 builds the operator with -tags pprof and
# records a CPU profile of its first listing run (top functions printed,
# the profile kept in .local/bench/).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
duration="${BENCH_DURATION:-8s}"
rounds="${BENCH_ROUNDS:-5}"
profile="${BENCH_PROFILE:-}"
release="RELEASE.2025-04-08T15-41-24Z"

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null || ! command -v minisign >/dev/null; then
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx-light wrk minisign
fi

work="$(mktemp -d /tmp/osop-bench-XXXXXX)"
chmod 755 "$work"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	[[ -f "$work/nginx/nginx.pid" ]] && kill "$(cat "$work/nginx/nginx.pid")" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# One certificate for both servers.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
	-subj "/CN=object-store-operator.bench.svc" -addext "subjectAltName=DNS:object-store-operator.bench.svc,IP:127.0.0.1" \
	-keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
chmod 644 "$work/tls.key"

# A 128 MiB release in the store.
store="$work/store"
mkdir -p "$store/linux-amd64"
bin="$store/linux-amd64/minio.$release"
head -c $((128 << 20)) /dev/urandom > "$bin"
(cd "$store/linux-amd64" && sha256sum "minio.$release" > "minio.$release.sha256sum")
# Signed, as the store lists nothing whose .minisig does not verify.
minisign -G -W -p "$work/minisign.pub" -s "$work/minisign.key" >/dev/null
minisign -S -s "$work/minisign.key" -m "$bin" >/dev/null
chmod -R a+rX "$store"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
op_port="$(free_port)"; metrics_port="$(free_port)"; nginx_port="$(free_port)"

operator="$root/bin/operator"
if [[ -n "$profile" ]]; then
	# The profile covers the first listing run but one second, so it ends
	# before wrk does.
	if [[ ! "$duration" =~ ^[0-9]+s$ ]] || (( ${duration%s} < 2 )); then
		echo "BENCH_PROFILE needs BENCH_DURATION in whole seconds, at least 2s (got $duration)" >&2; exit 1
	fi
	profile_seconds=$(( ${duration%s} - 1 ))
	operator="$work/operator"
	(cd "$root" && CGO_ENABLED=0 go build -tags pprof -o "$operator" ./cmd/operator)
fi
OPERATOR_MINISIGN_PUBKEYS="$(sed -n 2p "$work/minisign.pub")" \
OPERATOR_LOG_LEVEL="${BENCH_LOG_LEVEL:-info}" OPERATOR_UPDATE_DIR="$store" OPERATOR_UPGRADE_ADDRESS="127.0.0.1:$op_port" OPERATOR_METRICS_ADDRESS="127.0.0.1:$metrics_port" \
	"$operator" --tls-cert-file "$work/tls.crt" --tls-key-file "$work/tls.key" > "$work/operator.log" 2>&1 &
op_pid=$!
pids+=("$op_pid")
for _ in $(seq 100); do
	curl -fs "http://127.0.0.1:$metrics_port/readyz" >/dev/null && break
	sleep 0.1
done
curl -fsk "https://127.0.0.1:$op_port/webhook/v1/update" > "$work/listing.json"
chmod 644 "$work/listing.json"

mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes auto;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	sendfile on;
	keepalive_requests 1000000;
	types { application/json json; }
	server {
		listen 127.0.0.1:$nginx_port ssl;
		ssl_certificate $work/tls.crt;
		ssl_certificate_key $work/tls.key;
		ssl_protocols TLSv1.2 TLSv1.3;
		location = /webhook/v1/update { default_type application/json; alias $work/listing.json; }
		location /webhook/v1/update/ { alias $store/; }
	}
}
NGINX
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf"
for _ in $(seq 50); do curl -fsk -o /dev/null "https://127.0.0.1:$nginx_port/webhook/v1/update" && break; sleep 0.1; done

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
idle_rss="$(rss_kib "$op_pid")"

# wrk prints "Requests/sec: N" and "Transfer/sec: N{B,KB,MB,GB}".
measure() { # port path connections metric [extra wrk args]
	local port="$1" path="$2" conns="$3" metric="$4"; shift 4
	local out
	out="$(wrk -t2 -c"$conns" -d"$duration" "$@" "https://127.0.0.1:$port$path")"
	if grep -q "Non-2xx" <<<"$out"; then echo "non-2xx answers from port $port: $out" >&2; exit 1; fi
	if [[ "$metric" == rps ]]; then
		awk '/Requests\/sec/ {print $2}' <<<"$out"
	else
		awk '/Transfer\/sec/ {v=$2; u=substr(v,length(v)-1); n=substr(v,1,length(v)-2);
			if (u=="GB") n*=1024; else if (u=="KB") n/=1024; else if (u!="MB") n=substr(v,1,length(v)-1)/1048576; print n}' <<<"$out"
	fi
}

report() { # name unit ours theirs goal
	awk -v name="$1" -v unit="$2" -v a="$3" -v b="$4" -v goal="$5" 'BEGIN {
		r = a / b; verdict = (r >= goal) ? "meets" : "BELOW";
		printf "%-44s operator %10.1f %-6s nginx %10.1f %-6s ratio %.2fx (goal >= %.1fx: %s)\n", name, a, unit, b, unit, r, goal, verdict }'
}

dl="/webhook/v1/update/linux-amd64/minio.$release"
echo "object-store-operator vs nginx $(nginx -v 2>&1 | cut -d/ -f2), wrk -t2 -d$duration, $(nproc) cores, TLS ECDSA P-256"
for c in 8 64; do
	ours="$(measure "$op_port" "$dl" "$c" mb)"; theirs="$(measure "$nginx_port" "$dl" "$c" mb)"
	report "128 MiB downloads, $c connections" "MiB/s" "$ours" "$theirs" 1.0
done
peak_rss="$(rss_kib "$op_pid")"
# The listing: rounds alternate which server goes first, so neither always
# gets the warmer machine; the median ratio is the figure.
ratios=()
for ((i = 1; i <= rounds; i++)); do
	if [[ -n "$profile" && $i -eq 1 ]]; then
		curl -fs -o "$work/cpu.pprof" "http://127.0.0.1:$metrics_port/debug/pprof/profile?seconds=$profile_seconds" &
		prof_pid=$!
	fi
	if (( i % 2 )); then
		ours="$(measure "$op_port" /webhook/v1/update 64 rps)"; theirs="$(measure "$nginx_port" /webhook/v1/update 64 rps)"
	else
		theirs="$(measure "$nginx_port" /webhook/v1/update 64 rps)"; ours="$(measure "$op_port" /webhook/v1/update 64 rps)"
	fi
	ratios+=("$(awk -v a="$ours" -v b="$theirs" 'BEGIN {printf "%.2f", a / b}')")
	report "GET /webhook/v1/update, 64 keep-alive, run $i" "req/s" "$ours" "$theirs" 0.8
done
median="$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}')"
awk -v m="$median" -v runs="${ratios[*]}" 'BEGIN {
	printf "GET /webhook/v1/update, median of %d runs (%s): ratio %.2fx (goal >= 0.8x: %s)\n", split(runs, r, " "), runs, m, (m >= 0.8) ? "meets" : "BELOW" }'
if [[ -n "$profile" ]]; then
	wait "$prof_pid"
	mkdir -p "$root/.local/bench"
	cp "$work/cpu.pprof" "$root/.local/bench/listing.cpu.pprof"
	cp "$operator" "$root/.local/bench/operator.pprof"
	echo "CPU profile of the operator's first listing run (.local/bench/listing.cpu.pprof):"
	(cd "$root" && go tool pprof -top -nodecount=30 .local/bench/operator.pprof .local/bench/listing.cpu.pprof 2>/dev/null)
fi
ours="$(measure "$op_port" /webhook/v1/update 64 rps -H "Connection: close")"
theirs="$(measure "$nginx_port" /webhook/v1/update 64 rps -H "Connection: close")"
report "full handshakes (Connection: close), 64" "req/s" "$ours" "$theirs" 1.0
echo "operator RSS: idle $((idle_rss / 1024)) MiB, after the download runs $((peak_rss / 1024)) MiB (growth $(((peak_rss - idle_rss) / 1024)) MiB, goal <= 64 MiB)"
