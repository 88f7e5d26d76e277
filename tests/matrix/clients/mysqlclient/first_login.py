"""mysqlclient's (MySQLdb over libmariadb) first logins with its default
options (contract: tests/matrix/README.md, "First login"): no TLS unless
asked; caching_sha2_password full authentication over plain TCP fetches
the server's RSA key."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import MySQLdb  # noqa: E402

from matrix_common import env, rows, run  # noqa: E402

FIRST_LOGIN_SQL = "SELECT 1 AS one, CURRENT_USER() AS user"


def login():
    conn = MySQLdb.connect(host=env("MQ_HOST"), port=int(env("MQ_PORT")), user=env("MQ_USER"),
                           password=env("MQ_PASSWORD"), database=env("MQ_DATABASE"))
    cur = conn.cursor()
    cur.execute(FIRST_LOGIN_SQL)
    answer = {"rows": rows(cur.fetchall())}
    cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
    answer["encrypted"] = cur.fetchone()[1] != ""
    conn.close()
    return answer


def check_defaults():
    # The first login, then one more (a caching server's fast path).
    return [login(), login()]


if __name__ == "__main__":
    run([("defaults", check_defaults)])
