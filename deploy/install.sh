#!/usr/bin/env bash
# One-time setup of a fresh Debian machine for deploy/services.sh:
#   * apt packages (only those missing; `apt-get update` only when something must be installed):
#     clickhouse-server, clickhouse-client, default-jre-headless, curl, maven, openssl,
#     prometheus-alertmanager (the alerter's tests push alerts to a private one), prometheus (its
#     promtool parses the Grafana dashboard's queries in tests/test_grafana_dashboard.py), and
#     chromium with chromium-driver (the HTML incident report's tests open it headless), g++ (the
#     logger's native hooks are compiled on first use);
#   * the Kafka broker jars, fetched with Maven into $SLEUTH_STATE_DIR/kafka/lib (if missing).
# Nothing is started here, and the Debian clickhouse-server and prometheus-alertmanager services are
# not used: the scripts run private servers from the same binaries (on a systemd machine the packages
# may start their own services on 9000/8123 and 9093/9094 when first installed; they do not clash
# with ours and can be disabled separately).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"

have() { command -v "$1" >/dev/null 2>&1; }

missing=()
have clickhouse-server || [[ -x /usr/sbin/clickhouse-server ]] || missing+=(clickhouse-server)
have clickhouse-client || missing+=(clickhouse-client)
have java || missing+=(default-jre-headless)
have curl || missing+=(curl)
have mvn || missing+=(maven)
have openssl || missing+=(openssl)  # the gateway TLS test makes its certificate with it
have prometheus-alertmanager || [[ -x /usr/bin/prometheus-alertmanager ]] || missing+=(prometheus-alertmanager)
have promtool || missing+=(prometheus)
have chromium || missing+=(chromium)
have chromedriver || missing+=(chromium-driver)
have g++ || missing+=(g++)  # torch's cpp_extension compiles the logger's native hooks with it

if ((${#missing[@]})); then
    sudo=()
    if ((EUID != 0)); then
        have sudo || {
            printf 'error: need root (or sudo) to install: %s\n' "${missing[*]}" >&2
            exit 1
        }
        sudo=(sudo)
    fi
    printf 'install: apt-get install %s\n' "${missing[*]}" >&2
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
    printf 'install: apt packages already present\n' >&2
fi

bash "$HERE/kafka.sh" fetch
printf 'install: done; start with deploy/services.sh up\n' >&2
