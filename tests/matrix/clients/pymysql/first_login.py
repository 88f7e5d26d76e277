"""PyMySQL's first logins with its default options, installed without
`cryptography` as a plain `pip install PyMySQL` leaves it (contract:
tests/matrix/README.md, "First login"). Against a server whose accounts
use caching_sha2_password over plain TCP it could not log in at all."""

import importlib.util
import os
import ssl
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import pymysql  # noqa: E402

from matrix_common import env, rows, run  # noqa: E402

FIRST_LOGIN_SQL = "SELECT 1 AS one, CURRENT_USER() AS user"


def login():
    conn = pymysql.connect(host=env("MQ_HOST"), port=int(env("MQ_PORT")), user=env("MQ_USER"),
                           password=env("MQ_PASSWORD"), database=env("MQ_DATABASE"))
    with conn.cursor() as cur:
        cur.execute(FIRST_LOGIN_SQL)
        answer = {"rows": rows(cur.fetchall()), "encrypted": isinstance(conn._sock, ssl.SSLSocket)}
    conn.close()
    return answer


def check_defaults():
    if importlib.util.find_spec("cryptography") is not None:
        raise RuntimeError("this venv must not have cryptography (see setup)")
    # The first login, then one more (a caching server's fast path).
    return [login(), login()]


if __name__ == "__main__":
    run([("defaults", check_defaults)])
