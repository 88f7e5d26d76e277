"""The `mariadb` client's first logins over TCP with its default options,
and asking for TLS (contract: tests/matrix/README.md, "First login"). Its
defaults use TLS, unverified, when the server offers it; without TLS it
passes caching_sha2_password only by sending the password in cleartext,
which a server must refuse over plain TCP. `--no-defaults`: no option
file changes what it does."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

from matrix_common import env, run  # noqa: E402

SCRIPT = "SELECT 1 AS one, CURRENT_USER() AS user;\nstatus\n"


def login(*extra):
    cmd = ["mariadb", "--no-defaults", "--batch", f"--host={env('MQ_HOST')}",
           f"--port={env('MQ_PORT')}", "--protocol=TCP", f"--user={env('MQ_USER')}",
           f"--password={env('MQ_PASSWORD')}", *extra, env("MQ_DATABASE")]
    p = subprocess.run(cmd, input=SCRIPT.encode(), capture_output=True, timeout=60)
    out = p.stdout.decode("utf-8", "replace")
    # `status` reports the client's side of the connection; keep only
    # whether a cipher is in use (which one may differ).
    ssl_line = [line for line in out.splitlines() if line.startswith("SSL:")]
    return {"exit": p.returncode, "result": out.split("--------------")[0].splitlines(),
            "encrypted": bool(ssl_line) and "Cipher in use is" in ssl_line[0],
            "stderr": p.stderr.decode("utf-8", "replace").splitlines()}


if __name__ == "__main__":
    run([
        # The first login, then one more (a caching server's fast path).
        ("defaults", lambda: [login(), login()]),
        ("ssl", lambda: login("--ssl")),
        ("tls_1_2", lambda: login("--ssl", "--tls-version=TLSv1.2")),
    ])
