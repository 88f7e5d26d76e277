"""MySQL Connector/Python's first logins with its default options
(contract: tests/matrix/README.md, "First login"): it uses TLS, unverified,
whenever the server offers it, and refuses caching_sha2_password full
authentication without it (2061 "Authentication requires secure
connection")."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import mysql.connector  # noqa: E402

from matrix_common import env, rows, run  # noqa: E402

FIRST_LOGIN_SQL = "SELECT 1 AS one, CURRENT_USER() AS user"


def login():
    conn = mysql.connector.connect(host=env("MQ_HOST"), port=int(env("MQ_PORT")),
                                   user=env("MQ_USER"), password=env("MQ_PASSWORD"),
                                   database=env("MQ_DATABASE"))
    cur = conn.cursor()
    cur.execute(FIRST_LOGIN_SQL)
    answer = {"rows": rows(cur.fetchall()), "encrypted": conn.is_secure}
    cur.close()
    conn.close()
    return answer


def check_defaults():
    # The first login, then one more (a caching server's fast path).
    return [login(), login()]


if __name__ == "__main__":
    run([("defaults", check_defaults)])
