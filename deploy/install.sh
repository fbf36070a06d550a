#!/usr/bin/env bash
# One-time setup of a fresh Debian machine for deploy/services.sh:
#   * apt packages (only those missing; `apt-get update` only when something must be installed):
#     clickhouse-server, clickhouse-client, default-jre-headless, curl, maven;
#   * the Kafka broker jars, fetched with Maven into $SLEUTH_STATE_DIR/kafka/lib (if missing).
# Nothing is started here, and the Debian clickhouse-server service is not used: the scripts run a
# private server from the same binary (on a systemd machine the package may start its own service
# on 9000/8123 when first installed; it does not clash with ours and can be disabled separately).
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
