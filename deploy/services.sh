#!/usr/bin/env bash
# The local services at once: ClickHouse (deploy/clickhouse.sh), Kafka (deploy/kafka.sh) and
# Alertmanager (deploy/alertmanager.sh).
#
#   deploy/services.sh up       start all (idempotent); prints one address line per service
#   deploy/services.sh down     stop all (only processes these scripts started)
#   deploy/services.sh status   one line per service; exit 0 when all run, 3 otherwise
#
# Same environment variables as the scripts (ports, SLEUTH_STATE_DIR, timeouts).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
SERVICES=(clickhouse kafka alertmanager)

case "${1:-}" in
up)
    # ClickHouse first: it is up in about a second, Kafka takes a few; Alertmanager needs neither.
    for svc in "${SERVICES[@]}"; do
        bash "$HERE/$svc.sh" up
    done
    ;;
down)
    rc=0
    for svc in alertmanager kafka clickhouse; do
        bash "$HERE/$svc.sh" down || rc=1
    done
    exit "$rc"
    ;;
status)
    rc=0
    for svc in "${SERVICES[@]}"; do
        bash "$HERE/$svc.sh" status || rc=3
    done
    exit "$rc"
    ;;
*)
    printf 'usage: %s up|down|status\n' "$0" >&2
    exit 2
    ;;
esac
