#!/usr/bin/env bash
# make bench: the upgrade server against nginx, on loopback, with the same
# files, the same ECDSA P-256 certificate and the same load generator (wrk)
# in one run. Prints ratios project/nginx; higher is better for the
# operator. Installs nginx, wrk and minisign from Debian if missing.
#
# BENCH_DURATION (8s) is each wrk run; BENCH_ROUNDS (5) is how many
# rounds (each server once, which goes first rotating) each figure gets
# (downloads, listing, full handshakes), reported as their median ratio.
# BENCH_ONLY (a comma list of downloads, listing, handshakes) runs only
# those.
# BENCH_PROFILE=listing (or 1), handshakes or downloads builds the operator
# with -tags pprof and records a CPU profile of its first such run (top
# functions printed, the profile kept in .local/bench/). OSOP_OPERATOR runs
# that binary instead of bin/operator.
#
# The listing and new connections are also measured against net/http
# alone (hack/nethttp: the upgrade server's http.Server settings and TLS
# configuration serving the same bytes, without any of the operator's own
# code) in the same rounds: operator/net/http is what the operator's code
# costs, net/http/nginx what Go's HTTP stack does. BENCH_NETHTTP=off skips
# it.
#
# BENCH_ONLY=attack (also part of a full run) measures one honest client
# of a second operator, run with the chart's default limits, alone and
# then while another loopback address (hack/flood) holds 4,000 idle
# connections, 80 slow downloads and 100 zero-window HTTP/2 connections:
# its listing rate and a full download's time as ratios of the same
# client with no attack (goal >= 0.8), and that operator's peak RSS (goal
# <= 256 MiB).
#
# The operator runs as the chart deploys it: in the chart's default
# 512 MiB memory limit, which the operator would read from its cgroup and
# here reads from GOMEMLIMIT (90% of it, as the operator sets it);
# BENCH_MEMORY_LIMIT_MIB changes it, 0 runs it without a limit.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
duration="${BENCH_DURATION:-8s}"
rounds="${BENCH_ROUNDS:-5}"
profile="${BENCH_PROFILE:-}"
only="${BENCH_ONLY:-}"
profile_what="$profile"
[[ "$profile_what" == 1 ]] && profile_what=listing
prof_pid=""
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
op_port="$(free_port)"; metrics_port="$(free_port)"; nginx_port="$(free_port)"; nethttp_port="$(free_port)"

operator="${OSOP_OPERATOR:-$root/bin/operator}"
if [[ -n "$profile" ]]; then
	# The profile covers the first such run but one second, so it ends
	# before wrk does.
	if [[ ! "$duration" =~ ^[0-9]+s$ ]] || (( ${duration%s} < 2 )); then
		echo "BENCH_PROFILE needs BENCH_DURATION in whole seconds, at least 2s (got $duration)" >&2; exit 1
	fi
	profile_seconds=$(( ${duration%s} - 1 ))
	operator="$work/operator"
	(cd "$root" && CGO_ENABLED=0 go build -tags pprof -o "$operator" ./cmd/operator)
fi
limit_mib="${BENCH_MEMORY_LIMIT_MIB:-512}"
memlimit=()
if (( limit_mib > 0 )) && [[ -z "${GOMEMLIMIT:-}" ]]; then memlimit=(env "GOMEMLIMIT=$((limit_mib * 1024 * 1024 * 9 / 10))"); fi
# wrk is one address standing for 64 pods: its per-client shares are
# raised to what 64 pods would have together.
OPERATOR_MINISIGN_PUBKEYS="$(sed -n 2p "$work/minisign.pub")" \
OPERATOR_MAX_DOWNLOADS_PER_CLIENT=64 OPERATOR_MAX_CONNECTIONS_PER_CLIENT=256 \
OPERATOR_LOG_LEVEL="${BENCH_LOG_LEVEL:-info}" OPERATOR_UPDATE_DIR="$store" OPERATOR_UPGRADE_ADDRESS="127.0.0.1:$op_port" OPERATOR_METRICS_ADDRESS="127.0.0.1:$metrics_port" \
	"${memlimit[@]}" "$operator" --tls-cert-file "$work/tls.crt" --tls-key-file "$work/tls.key" > "$work/operator.log" 2>&1 &
op_pid=$!
pids+=("$op_pid")
for _ in $(seq 100); do
	curl -fs "http://127.0.0.1:$metrics_port/readyz" >/dev/null && break
	sleep 0.1
done
# The store lists the release once it has hashed it and verified its
# signature, which on a busy machine takes longer than readiness: nginx
# must serve the same listing, and the downloads need the binary listed.
for _ in $(seq 600); do
	curl -fsk "https://127.0.0.1:$op_port/webhook/v1/update" > "$work/listing.json" 2>/dev/null && grep -q "\"minio.$release\"" "$work/listing.json" && break
	sleep 0.2
done
grep -q "\"minio.$release\"" "$work/listing.json" || { echo "the operator did not list minio.$release within 120 s:" >&2; cat "$work/listing.json" "$work/operator.log" >&2; exit 1; }
chmod 644 "$work/listing.json"

mkdir -p "$work/nginx"
# Both servers log the same: one line per request, written in batches
# (the operator's every 100 ms; nginx's buffer flushed as often), or
# neither when OPERATOR_ACCESS_LOG=off.
nginx_access_log="access_log $work/nginx/access.log combined buffer=64k flush=100ms;"
[[ "${OPERATOR_ACCESS_LOG:-on}" == off ]] && nginx_access_log="access_log off;"
cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes auto;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
	$nginx_access_log
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

nethttp_pid=""
if [[ "${BENCH_NETHTTP:-on}" != off ]]; then
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$work/nethttp" ./hack/nethttp)
	# The operator's heap floor, from its log, so both collect alike.
	heap_floor="$(grep -o '"heapFloorBytes":[0-9]*' "$work/operator.log" | cut -d: -f2 || true)"
	"$work/nethttp" "$work/listing.json" "$work/tls.crt" "$work/tls.key" "127.0.0.1:$nethttp_port" ${heap_floor:+"$heap_floor"} &
	nethttp_pid=$!
	pids+=("$nethttp_pid")
	for _ in $(seq 50); do curl -fsk -o /dev/null "https://127.0.0.1:$nethttp_port/webhook/v1/update" && break; sleep 0.1; done
	# Else every round would measure a closed port (ratios of inf and 0).
	curl -fsk -o /dev/null "https://127.0.0.1:$nethttp_port/webhook/v1/update" ||
		{ echo "net/http alone (hack/nethttp) does not answer on 127.0.0.1:$nethttp_port" >&2; exit 1; }
fi

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
idle_rss="$(rss_kib "$op_pid")"

# server_pids port: the processes whose CPU time a run costs (nginx: its
# master and workers).
server_pids() {
	case "$1" in
	"$op_port") echo "$op_pid" ;;
	"$nethttp_port") echo "$nethttp_pid" ;;
	*) local m; m="$(cat "$work/nginx/nginx.pid")"; echo "$m" $(pgrep -P "$m") ;;
	esac
}
cpu_ticks() { local t=0 p f; for p in "$@"; do read -r -a f < "/proc/$p/stat"; t=$((t + f[13] + f[14])); done; echo "$t"; }

# measure prints the rate and the server's CPU microseconds per unit
# (request or MiB). The CPU figure varies less than the rate when other
# work shares the machine. wrk prints "Requests/sec: N" and
# "Transfer/sec: N{B,KB,MB,GB}".
measure() { # port path connections metric [extra wrk args]
	local port="$1" path="$2" conns="$3" metric="$4"; shift 4
	local out rate c0 c1 pids
	pids="$(server_pids "$port")"
	c0="$(cpu_ticks $pids)"
	out="$(wrk -t2 -c"$conns" -d"$duration" "$@" "https://127.0.0.1:$port$path")"
	c1="$(cpu_ticks $pids)"
	if grep -q "Non-2xx" <<<"$out"; then echo "non-2xx answers from port $port: $out" >&2; exit 1; fi
	if [[ "$metric" == rps ]]; then
		rate="$(awk '/Requests\/sec/ {print $2}' <<<"$out")"
	else
		rate="$(awk '/Transfer\/sec/ {v=$2; u=substr(v,length(v)-1); n=substr(v,1,length(v)-2);
			if (u=="GB") n*=1024; else if (u=="KB") n/=1024; else if (u!="MB") n=substr(v,1,length(v)-1)/1048576; print n}' <<<"$out")"
	fi
	awk -v r="$rate" -v c=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v d="$(awk '/requests in/ {sub(/s,$/, "", $4); print $4}' <<<"$out")" \
		'BEGIN { printf "%s %.1f\n", r, (r > 0 && d > 0) ? c / hz / (r * d) * 1e6 : 0 }'
}

report() { # name unit "ours cpu" "theirs cpu" goal
	local a ca b cb
	read -r a ca <<<"$3"; read -r b cb <<<"$4"
	awk -v name="$1" -v unit="$2" -v a="$a" -v b="$b" -v ca="$ca" -v cb="$cb" -v goal="$5" 'BEGIN {
		r = a / b; verdict = (r >= goal) ? "meets" : "BELOW";
		printf "%-44s operator %10.1f %-6s nginx %10.1f %-6s ratio %.2fx (goal >= %.2fx: %s); CPU us/%s operator %.1f nginx %.1f\n", name, a, unit, b, unit, r, goal, verdict, (unit == "req/s") ? "req" : "MiB", ca, cb }'
}

dl="/webhook/v1/update/linux-amd64/minio.$release"

# compare: BENCH_ROUNDS rounds that rotate which server goes first, so
# none always gets the warmer (or the busier) machine; the median ratio is
# the figure. With a third server (net/http alone) each round measures it
# too, and its ratios are printed beside.
compare() { # key name unit goal metric path conns [extra wrk args]
	local key="$1" name="$2" unit="$3" goal="$4" metric="$5" path="$6" conns="$7"; shift 7
	local i j ports=("$op_port" "$nginx_port") res=() ratios=() cpus=() floor=() stack=()
	[[ -n "$nethttp_pid" && "$metric" == rps ]] && ports+=("$nethttp_port")
	local n=${#ports[@]}
	for ((i = 1; i <= rounds; i++)); do
		if [[ -n "$profile" && "$key" == "$profile_what" && $i -eq 1 && -z "$prof_pid" ]]; then
			curl -fs -o "$work/cpu.pprof" "http://127.0.0.1:$metrics_port/debug/pprof/profile?seconds=$profile_seconds" &
			prof_pid=$!
		fi
		# Round 1 starts with the operator: a CPU profile (BENCH_PROFILE)
		# covers the first run of the round it starts in.
		for ((j = 0; j < n; j++)); do
			local k=$(((i - 1 + j) % n))
			res[k]="$(measure "${ports[k]}" "$path" "$conns" "$metric" "$@")"
		done
		ratios+=("$(awk -v a="${res[0]% *}" -v b="${res[1]% *}" 'BEGIN {printf "%.2f", a / b}')")
		cpus+=("$(awk -v a="${res[0]#* }" -v b="${res[1]#* }" 'BEGIN {printf "%.2f", (a > 0) ? b / a : 0}')")
		report "$name, run $i" "$unit" "${res[0]}" "${res[1]}" "$goal"
		if ((n == 3)); then
			floor+=("$(awk -v a="${res[0]% *}" -v b="${res[2]% *}" 'BEGIN {printf "%.2f", a / b}')")
			stack+=("$(awk -v a="${res[2]% *}" -v b="${res[1]% *}" 'BEGIN {printf "%.2f", a / b}')")
			echo "  net/http alone ${res[2]% *} $unit (CPU us/req ${res[2]#* }): operator/net/http ${floor[-1]}x, net/http/nginx ${stack[-1]}x"
		fi
	done
	awk -v name="$name" -v runs="${ratios[*]}" -v cpus="${cpus[*]}" -v goal="$goal" -v floor="${floor[*]}" -v stack="${stack[*]}" '
		function median(s,   v, n, i, j, t) { n = split(s, v, " ");
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
			return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
		BEGIN { m = median(runs);
		printf "%s, median of %d runs (%s): ratio %.2fx (goal >= %.2fx: %s); CPU per unit nginx/operator %.2fx (%s)\n",
			name, split(runs, r, " "), runs, m, goal, (m >= goal) ? "meets" : "BELOW", median(cpus), cpus
		if (floor != "") printf "  same rounds: operator/net/http alone %.2fx (%s), net/http alone/nginx %.2fx (%s)\n",
			median(floor), floor, median(stack), stack }' | tee -a "$work/summary"
}

wants() { [[ -z "$only" || ",$only," == *",$1,"* ]]; }

echo "object-store-operator vs nginx $(nginx -v 2>&1 | cut -d/ -f2), wrk -t2 -d$duration, $rounds rotating rounds, $(nproc) cores, TLS ECDSA P-256"
: > "$work/summary"
if wants downloads; then
	for c in 8 64; do
		compare downloads "128 MiB downloads, $c connections" "MiB/s" 1.0 mb "$dl" "$c"
	done
fi
peak_rss="$(rss_kib "$op_pid")"
if wants listing; then
	compare listing "GET /webhook/v1/update, 64 keep-alive" "req/s" 0.9 rps /webhook/v1/update 64
fi
if wants handshakes; then
	compare handshakes "new connections (Connection: close), 64" "req/s" 1.05 rps /webhook/v1/update 64 -H "Connection: close"
fi
if wants attack; then
	# A second operator with the chart's default limits, on a copy of the
	# store (hard links), and the hostile client from another address.
	cp -al "$store" "$work/store2"
	op2_port="$(free_port)"; metrics2_port="$(free_port)"
	OPERATOR_MINISIGN_PUBKEYS="$(sed -n 2p "$work/minisign.pub")" OPERATOR_ACCESS_LOG=off \
	OPERATOR_UPDATE_DIR="$work/store2" OPERATOR_UPGRADE_ADDRESS="127.0.0.1:$op2_port" OPERATOR_METRICS_ADDRESS="127.0.0.1:$metrics2_port" \
		"${memlimit[@]}" "$operator" --tls-cert-file "$work/tls.crt" --tls-key-file "$work/tls.key" > "$work/operator2.log" 2>&1 &
	op2_pid=$!
	pids+=("$op2_pid")
	for _ in $(seq 600); do
		curl -fsk "https://127.0.0.1:$op2_port/webhook/v1/update" 2>/dev/null | grep -q "\"minio.$release\"" && break
		sleep 0.2
	done
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$work/flood" ./hack/flood)
	honest() { # prints "listing-req/s download-seconds" (the faster of two downloads)
		local rps a b
		rps="$(wrk -t2 -c16 -d"$duration" "https://127.0.0.1:$op2_port/webhook/v1/update" | awk '/Requests\/sec/ {print $2}')"
		a="$(curl -fsk -o /dev/null -w '%{time_total}' "https://127.0.0.1:$op2_port$dl")"
		b="$(curl -fsk -o /dev/null -w '%{time_total}' "https://127.0.0.1:$op2_port$dl")"
		awk -v r="$rps" -v a="$a" -v b="$b" 'BEGIN { print r, (a < b) ? a : b }'
	}
	# Alone, under attack, alone again: the attack's figures against the
	# mean of the two calm ones, so a machine that drifts during the run
	# moves both sides alike.
	read -r calm1_rps calm1_secs <<<"$(honest)"
	"$work/flood" -addr "127.0.0.1:$op2_port" -source 127.0.0.2 -path "$dl" -idle 4000 -slow 80 -h2 100 -for 10m > "$work/flood.out" 2>&1 &
	flood_pid=$!
	pids+=("$flood_pid")
	for _ in $(seq 1200); do grep -q '^holding' "$work/flood.out" && break; sleep 0.1; done
	grep -q '^holding' "$work/flood.out" || { echo "hack/flood did not set up within 120 s:" >&2; cat "$work/flood.out" >&2; exit 1; }
	read -r hit_rps hit_secs <<<"$(honest)"
	peak2="$(awk '/VmHWM/ {print $2}' "/proc/$op2_pid/status")"
	kill "$flood_pid" 2>/dev/null || true
	wait "$flood_pid" 2>/dev/null || true
	read -r calm2_rps calm2_secs <<<"$(honest)"
	awk -v a="$hit_rps" -v b1="$calm1_rps" -v b2="$calm2_rps" -v c1="$calm1_secs" -v c2="$calm2_secs" -v d="$hit_secs" -v held="$(cat "$work/flood.out")" -v rss="$peak2" 'BEGIN {
		b = (b1 + b2) / 2; c = (c1 + c2) / 2; l = a / b; t = c / d;
		printf "under attack (another address: 4000 idle, 80 slow downloads, 100 zero-window h2; it was let hold: %s)\n", held
		printf "  listing, 16 keep-alive: %.0f req/s vs %.0f alone (%.0f, %.0f): ratio %.2fx (goal >= 0.80: %s)\n", a, b, b1, b2, l, (l >= 0.8) ? "meets" : "BELOW"
		printf "  128 MiB download: %.2f s vs %.2f s alone (%.2f, %.2f): ratio %.2fx (goal >= 0.80: %s)\n", d, c, c1, c2, t, (t >= 0.8) ? "meets" : "BELOW"
		printf "  operator peak RSS %d MiB (goal <= 256 MiB: %s)\n", rss / 1024, (rss <= 256 * 1024) ? "meets" : "ABOVE" }' | tee -a "$work/summary"
fi
if [[ -n "$prof_pid" ]]; then
	wait "$prof_pid"
	mkdir -p "$root/.local/bench"
	cp "$work/cpu.pprof" "$root/.local/bench/$profile_what.cpu.pprof"
	cp "$operator" "$root/.local/bench/operator.pprof"
	echo "CPU profile of the operator's first $profile_what run (.local/bench/$profile_what.cpu.pprof):"
	(cd "$root" && go tool pprof -top -nodecount=30 .local/bench/operator.pprof ".local/bench/$profile_what.cpu.pprof" 2>/dev/null)
fi
echo "summary (median ratios, operator/nginx):"
cat "$work/summary"
echo "operator RSS: idle $((idle_rss / 1024)) MiB, after the download runs $((peak_rss / 1024)) MiB (growth $(((peak_rss - idle_rss) / 1024)) MiB, goal <= 64 MiB)"
