"""MySQL Connector/Python through the matrix checks (contract:
tests/matrix/README.md): plain cursors for the text protocol,
`cursor(prepared=True)` for server-side prepared statements. Its C
extension needs OpenSSL 3.2, so on Debian 12 it runs its pure-Python
implementation (as its users there do)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import mysql.connector  # noqa: E402
from mysql.connector import pooling  # noqa: E402

from matrix_common import (  # noqa: E402
    PROCEDURE, TYPES_DDL, TYPES_LITERAL, TYPES_PARAMS, Skip, big_table_sql, description,
    digest, env, rows, run,
)

P = "mysql_connector_python"
TYPE_COLUMNS = ("id ti tiu si siu mi miu i iu bi biu de f d dt dtm ts tm y c vc tx bn vb bl js en st "
                "bt").split()


def args(**kw):
    a = dict(host=env("MQ_HOST"), port=int(env("MQ_PORT")), user=env("MQ_USER"),
             password=env("MQ_PASSWORD"), database=env("MQ_DATABASE"), charset="utf8mb4")
    a.update(kw)
    return a


def connect(**kw):
    # TLS is on by default (unverified) when the server offers it, which
    # Connector/Python needs for caching_sha2_password full authentication.
    return mysql.connector.connect(**args(**kw))


def result(cur):
    return {"description": description(cur), "rows": rows(cur.fetchall()) if cur.with_rows else [],
            "rowcount": cur.rowcount, "lastrowid": cur.lastrowid, "warnings": cur.warning_count}


def query(conn, sql, params=None, **cursor_kw):
    cur = conn.cursor(**cursor_kw)
    cur.execute(sql, params)
    answer = result(cur)
    cur.close()
    return answer


def error(e):
    return {"errno": e.errno, "sqlstate": e.sqlstate, "message": e.msg, "class": type(e).__name__}


def check_connect():
    conn = connect()
    answer = query(conn, "SELECT 1")
    answer["secure"] = conn.is_secure
    conn.close()
    return answer


def check_tls():
    if env("MQ_TLS") != "1":
        raise Skip("MQ_TLS=0")
    conn = connect(ssl_ca=env("MQ_TLS_CA"), ssl_verify_cert=True, ssl_verify_identity=True)
    answer = query(conn, "SELECT 'over tls' AS t")
    encrypted = conn.is_secure
    conn.close()
    return {"encrypted": encrypted, "result": answer}


def types(write, prepared):
    conn = connect(autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {P}_types")
    cur.execute(TYPES_DDL.format(p=P))
    cur.close()
    written = write(conn)
    # Connector/Python misreads YEAR in binary rows (a 2-byte integer it
    # parses as a length-prefixed string, against MariaDB itself), so the
    # prepared read gets that column as a number.
    columns = "*" if not prepared else ", ".join(
        "CAST(y AS SIGNED) AS y" if c == "y" else c for c in TYPE_COLUMNS)
    read = query(conn, f"SELECT {columns} FROM {P}_types WHERE id >= %s ORDER BY id", (1,),
                 prepared=prepared)
    conn.close()
    return {"written": written, "read": read}


def check_types_text():
    return types(lambda conn: query(conn, TYPES_LITERAL.format(p=P)), prepared=False)


def check_types_prepared():
    def write(conn):
        cur = conn.cursor(prepared=True)
        marks = ", ".join(["%s"] * 29)
        out = []
        for row in TYPES_PARAMS:
            cur.execute(f"INSERT INTO {P}_types VALUES ({marks})", row)
            out.append({"rowcount": cur.rowcount, "warnings": cur.warning_count})
        cur.close()
        return out
    return types(write, prepared=True)


def count(conn, table):
    cur = conn.cursor()
    cur.execute(f"SELECT COUNT(*) FROM {table}")
    n = cur.fetchone()[0]
    cur.close()
    return n


def check_transactions():
    t = f"{P}_tx"
    conn, other = connect(), connect(autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)")
    conn.start_transaction()
    cur.execute(f"INSERT INTO {t} VALUES (%s)", (1,))
    unseen = count(other, t)
    conn.commit()
    committed = count(other, t)
    conn.start_transaction()
    cur.execute(f"INSERT INTO {t} VALUES (2)")
    conn.rollback()
    rolled_back = count(other, t)
    conn.autocommit = False
    cur.execute(f"INSERT INTO {t} VALUES (3)")
    before = count(other, t)
    conn.commit()
    after = count(other, t)
    return {"uncommitted_seen_by_other": unseen, "after_commit": committed,
            "after_rollback": rolled_back, "autocommit_off_before_commit": before,
            "autocommit_off_after_commit": after, "in_transaction": conn.in_transaction}


def check_errors():
    t = f"{P}_err"
    conn = connect(autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)")
    cur.execute(f"INSERT INTO {t} VALUES (1)")
    out = []
    for sql in (f"INSERT INTO {t} VALUES (1)", "SELEC 1", f"SELECT * FROM {P}_no_such_table"):
        try:
            cur.execute(sql)
            out.append(None)
        except mysql.connector.Error as e:
            out.append(error(e))
    prepared = conn.cursor(prepared=True)
    try:
        prepared.execute(f"INSERT INTO {t} VALUES (?)", (1,))
        out.append(None)
    except mysql.connector.Error as e:
        out.append(error(e))
    cur.execute("SELECT 2")
    return {"errors": out, "still_works": cur.fetchone()[0]}


def check_procedure():
    conn = connect(autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP PROCEDURE IF EXISTS {P}_two")
    cur.execute(PROCEDURE.format(p=P))
    cur.callproc(f"{P}_two", (41,))
    sets = [{"description": description(r), "rows": rows(r.fetchall())} for r in cur.stored_results()]
    prepared = conn.cursor(prepared=True)
    prepared.execute(f"CALL {P}_two(?)", (7,))
    first = {"description": description(prepared), "rows": rows(prepared.fetchall())}
    return {"callproc": sets, "prepared_first_result": first}


def check_multi_statement():
    t = f"{P}_multi"
    conn = connect(autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(f"CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)")
    cur.execute(f"SELECT 1 AS one; INSERT INTO {t} (v) VALUES ('x'), ('y'); "
                f"SELECT * FROM {t} ORDER BY id", map_results=True)
    sets = [result(cur)]
    while cur.nextset():
        sets.append(result(cur))
    try:
        cur.execute(f"SELECT 1; SELECT * FROM {P}_missing; SELECT 3", map_results=True)
        failing = [result(cur)]
        while cur.nextset():
            failing.append(result(cur))
    except mysql.connector.Error as e:
        failing = error(e)
    return {"results": sets, "error_midway": failing}


def check_large_result():
    conn = connect(autocommit=True)
    cur = conn.cursor()
    for sql in big_table_sql(P, int(env("MQ_BIG_ROWS"))):
        cur.execute(sql)
    # Unbuffered (the default): rows are read as they are fetched.
    cur.execute(f"SELECT id, v FROM {P}_big ORDER BY id")
    answer = digest(iter(cur.fetchone, None))
    cur.execute(f"DROP TABLE {P}_big")
    return answer


def check_last_insert_id():
    t = f"{P}_ai"
    conn = connect(autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(f"CREATE TABLE {t} (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 1000")
    cur.execute(f"INSERT INTO {t} (v) VALUES (%s), (%s)", (1, 2))
    text_id = cur.lastrowid
    cur.execute("SELECT LAST_INSERT_ID()")
    text_sql = cur.fetchone()[0]
    prepared = conn.cursor(prepared=True)
    prepared.execute(f"INSERT INTO {t} (v) VALUES (?)", (3,))
    prepared_id = prepared.lastrowid
    cur.execute("SELECT LAST_INSERT_ID()")
    prepared_sql = cur.fetchone()[0]
    return {"text_lastrowid": text_id, "text_last_insert_id": text_sql,
            "prepared_lastrowid": prepared_id, "prepared_last_insert_id": prepared_sql}


def database(conn):
    cur = conn.cursor()
    cur.execute("SELECT DATABASE()")
    db = cur.fetchone()[0]
    cur.close()
    return db


def check_switch_database():
    conn = connect()
    start = database(conn)
    conn.database = env("MQ_OTHER_DATABASE")  # USE
    switched = database(conn)
    conn.cmd_init_db(env("MQ_DATABASE"))  # COM_INIT_DB
    back = database(conn)
    try:
        conn.cmd_init_db("no_such_database")
        unknown = None
    except mysql.connector.Error as e:
        unknown = error(e)
    return {"start": start, "switched": switched, "back": back, "unknown": unknown,
            "property": conn.database}


def check_pool_reset_ping():
    # A pool of one: a connection handed back is reset (COM_RESET_CONNECTION).
    pool = pooling.MySQLConnectionPool(pool_name="matrix", pool_size=1, pool_reset_session=True,
                                       **args())
    conn = pool.get_connection()
    cur = conn.cursor()
    cur.execute("SET @matrix = 42")
    cur.execute("SELECT @matrix")
    before = cur.fetchone()[0]
    cur.close()
    conn.close()  # back to the pool
    conn = pool.get_connection()
    cur = conn.cursor()
    cur.execute("SELECT @matrix")
    after = cur.fetchone()[0]
    conn.ping(reconnect=False)
    cur.execute("SET @matrix = 7")
    conn.reset_session()
    cur.execute("SELECT @matrix")
    after_reset = cur.fetchone()[0]
    conn.close()
    return {"before": before, "after_return_to_pool": after, "ping": True,
            "after_reset_session": after_reset}


def check_cursor():
    raise Skip("Connector/Python never asks for a server-side cursor (prepared cursors read "
               "the whole result)")


run([
    ("connect", check_connect),
    ("tls", check_tls),
    ("types_text", check_types_text),
    ("types_prepared", check_types_prepared),
    ("transactions", check_transactions),
    ("errors", check_errors),
    ("procedure", check_procedure),
    ("multi_statement", check_multi_statement),
    ("large_result", check_large_result),
    ("last_insert_id", check_last_insert_id),
    ("switch_database", check_switch_database),
    ("pool_reset_ping", check_pool_reset_ping),
    ("cursor", check_cursor),
])
