#!/usr/bin/env bash
# Installs promtool when it is not on PATH: the monitoring test checks and
# unit-tests the chart's PrometheusRule with it, and fails without it.
# Debian's prometheus package has it (the server comes along; nothing
# starts it). Kept apart from build-tools.sh, whose own hash is part of
# the control plane's pin.
set -euo pipefail

command -v promtool >/dev/null 2>&1 && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
	echo "promtool is missing and apt-get is not available: install Prometheus' promtool on PATH" >&2
	exit 1
fi
echo "installing promtool (Debian package prometheus)"
apt-get update
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus
