#!/usr/bin/env bash
# Brings up the whole chain on this machine and runs real queries through it:
#   a private MariaDB (temporary datadir, unix socket only)
#   -> myquic gateway (HTTP/3 on UDP and HTTP/2 on TCP, one port, TLS 1.3)
#   -> myquic sidecar (a local MySQL server on a free port and a unix socket,
#      one long-lived HTTP/3 connection to the gateway)
#   -> the stock `mariadb` client, through the sidecar; then the gateway's
#      API directly (myquic query over HTTP/3 and HTTP/2, curl with JSON).
# Everything is torn down on exit; set MYQUIC_KEEP=1 to keep it running.
set -euo pipefail
cd "$(dirname "$0")/../.."

cargo build --locked --quiet
bin=$PWD/target/debug/myquic
work=$(mktemp -d /tmp/myquic-run.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

as_root=(); [ "$(id -u)" = 0 ] && as_root=(--user=root)
echo "--- starting a private MariaDB in $work"
mariadb-install-db --no-defaults --datadir="$work/data" --auth-root-authentication-method=normal \
  --skip-test-db "${as_root[@]}" >"$work/install.log" 2>&1
mariadbd --no-defaults --datadir="$work/data" --socket="$work/mysql.sock" --skip-networking \
  --innodb-buffer-pool-size=32M --character-set-server=utf8mb4 --log-error="$work/mariadb.log" \
  "${as_root[@]}" &
pids+=($!)
for _ in $(seq 100); do mariadb --socket="$work/mysql.sock" -uroot -e 'select 1' >/dev/null 2>&1 && break; sleep 0.1; done
mariadb --socket="$work/mysql.sock" -uroot -e "
  CREATE DATABASE app;
  CREATE USER app@localhost IDENTIFIED BY 'backend-secret';
  GRANT ALL ON app.* TO app@localhost;"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
sidecar_port=$(free_port)
cat >"$work/myquic.toml" <<TOML
[gateway]
listen = "127.0.0.1:$port"
[gateway.tls]
self_signed_cert_out = "$work/gateway.pem"
[gateway.backend]
socket = "$work/mysql.sock"
[[gateway.credentials]]
username = "app"
password = { env = "APP_API_PASSWORD" }
backend_password = { value = "backend-secret" }
database = "app"
[gateway.admin]
listen = "127.0.0.1:0"

[sidecar]
listen = "127.0.0.1:$sidecar_port"
socket = "$work/sidecar.sock"
[sidecar.auth]
# MySQL 8's plugin, for the demo's full and fast-path logins below (the
# default, "auto", follows the backend: mysql_native_password for MariaDB).
plugin = "caching_sha2_password"
[[sidecar.auth.users]]
username = "app"
password = { value = "local-secret" }
[sidecar.upstream]
url = "https://localhost:$port"
ca = "$work/gateway.pem"
username = "app"
password = { env = "APP_API_PASSWORD" }
[sidecar.admin]
listen = "127.0.0.1:0"
TOML

echo "--- starting the gateway on 127.0.0.1:$port (UDP: HTTP/3, TCP: HTTP/2)"
APP_API_PASSWORD=api-secret "$bin" --config "$work/myquic.toml" gateway 2>"$work/gateway.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/gateway.pem" ] && curl -s -o /dev/null --cacert "$work/gateway.pem" "https://localhost:$port/" && break; sleep 0.1; done

echo "--- starting the sidecar on 127.0.0.1:$sidecar_port and $work/sidecar.sock"
APP_API_PASSWORD=api-secret "$bin" --config "$work/myquic.toml" sidecar 2>"$work/sidecar.log" &
pids+=($!)
for _ in $(seq 100); do [ -S "$work/sidecar.sock" ] && break; sleep 0.1; done

mysql=(mariadb --no-defaults --default-character-set=utf8mb4 -h 127.0.0.1 -P "$sidecar_port" -u app -plocal-secret
       --default-auth=caching_sha2_password --table app)
echo "--- the mariadb client through the sidecar's unix socket (caching_sha2_password full authentication)"
mariadb --no-defaults --default-character-set=utf8mb4 --socket="$work/sidecar.sock" -u app -plocal-secret --table app -e "
  CREATE TABLE greetings (id INT AUTO_INCREMENT PRIMARY KEY, lang VARCHAR(8), text VARCHAR(64));
  BEGIN;
  INSERT INTO greetings (lang, text) VALUES ('en', 'hello'), ('fr', 'bonjour'), ('ja', 'こんにちは 🐬');
  COMMIT;
  SELECT id, lang, text FROM greetings ORDER BY id;"
echo "--- and over TCP (caching_sha2_password fast path, as a MySQL 8 server after a first login)"
"${mysql[@]}" -e "SELECT lang, LENGTH(text) AS bytes FROM greetings WHERE id > 1;
  SELECT @@version AS backend, @@autocommit AS autocommit;"
echo "--- a SQL error keeps its number and SQLSTATE"
"${mysql[@]}" -e "SELECT * FROM no_such_table" 2>&1 || true

url="https://app:api-secret@localhost:$port"
echo "--- the gateway's API directly: queries over HTTP/3 (one session, so the transaction spans requests)"
"$bin" query --url "$url" --ca "$work/gateway.pem" \
  "BEGIN" \
  "INSERT INTO greetings (lang, text) VALUES ('de', 'hallo')" \
  "COMMIT" \
  "SELECT id, lang, text FROM greetings ORDER BY id"
echo "--- the same over HTTP/2"
"$bin" query --http2 --url "$url" --ca "$work/gateway.pem" "SELECT COUNT(*) AS greetings, VERSION() AS backend FROM greetings"
echo "--- the raw psdb API (Connect JSON, as @planetscale/database sends it), with curl over HTTP/2"
curl -sS --http2 --cacert "$work/gateway.pem" -u app:api-secret -D "$work/headers" \
  -H 'Content-Type: application/json' \
  --data '{"query":"SELECT lang, text FROM greetings WHERE id = 1"}' \
  "https://localhost:$port/psdb.v1alpha1.Database/Execute"
echo
grep -i '^alt-svc' "$work/headers"
echo "--- a wrong password is refused"
curl -sS --cacert "$work/gateway.pem" -u app:wrong -H 'Content-Type: application/json' \
  --data '{"query":"SELECT 1"}' -w ' (HTTP %{http_code})\n' "https://localhost:$port/psdb.v1alpha1.Database/Execute"
echo "--- myquic doctor, with the sidecar's config: every step to the gateway"
APP_API_PASSWORD=api-secret RUST_LOG=warn "$bin" --config "$work/myquic.toml" doctor

if [ "${MYQUIC_KEEP:-}" = 1 ]; then
  echo "--- running; gateway $url, CA $work/gateway.pem"
  echo "    sidecar: mariadb -h 127.0.0.1 -P $sidecar_port -u app -plocal-secret app   (or --socket=$work/sidecar.sock). Ctrl-C to stop."
  wait
fi
echo "--- done"
