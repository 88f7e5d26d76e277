#!/usr/bin/env bash
# Brings up the whole chain on this machine and runs real queries through it:
#   a private MariaDB (temporary datadir, unix socket only)
#   -> myquic gateway (HTTP/3 on UDP and HTTP/2 on TCP, one port, TLS 1.3)
#   -> queries over HTTP/3 and HTTP/2 (myquic query), and the raw JSON API (curl).
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

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
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
TOML

echo "--- starting the gateway on 127.0.0.1:$port (UDP: HTTP/3, TCP: HTTP/2)"
APP_API_PASSWORD=api-secret "$bin" --config "$work/myquic.toml" gateway 2>"$work/gateway.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/gateway.pem" ] && curl -s -o /dev/null --cacert "$work/gateway.pem" "https://localhost:$port/" && break; sleep 0.1; done

url="https://app:api-secret@localhost:$port"
echo "--- queries over HTTP/3 (one session, so the transaction spans requests)"
"$bin" query --url "$url" --ca "$work/gateway.pem" \
  "CREATE TABLE greetings (id INT AUTO_INCREMENT PRIMARY KEY, lang VARCHAR(8), text VARCHAR(64))" \
  "BEGIN" \
  "INSERT INTO greetings (lang, text) VALUES ('en', 'hello'), ('fr', 'bonjour'), ('ja', 'こんにちは 🐬')" \
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

if [ "${MYQUIC_KEEP:-}" = 1 ]; then
  echo "--- running; gateway $url, CA $work/gateway.pem. Ctrl-C to stop."
  wait
fi
echo "--- done"
