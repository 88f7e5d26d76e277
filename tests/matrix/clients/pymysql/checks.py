"""PyMySQL through the matrix checks (contract: tests/matrix/README.md).
PyMySQL has no server-side prepared statements: `types_prepared` uses its
parameterised queries (client-side escaping)."""

import os
import ssl
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import pymysql  # noqa: E402
import pymysql.cursors  # noqa: E402
from pymysql.constants import CLIENT  # noqa: E402

from matrix_common import (  # noqa: E402
    PROCEDURE, TYPES_DDL, TYPES_LITERAL, TYPES_PARAMS, Skip, big_table_sql, description,
    digest, env, rows, run,
)

P = "pymysql"


def connect(**kw):
    args = dict(host=env("MQ_HOST"), port=int(env("MQ_PORT")), user=env("MQ_USER"),
                password=env("MQ_PASSWORD"), database=env("MQ_DATABASE"), charset="utf8mb4")
    args.update(kw)
    return pymysql.connect(**args)


def query(conn, sql, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return {"description": description(cur), "rows": rows(cur.fetchall()),
                "rowcount": cur.rowcount, "lastrowid": cur.lastrowid,
                "warnings": cur._result.warning_count if cur._result else None}


def error(e):
    return {"errno": e.args[0], "message": e.args[1], "class": type(e).__name__}


def check_connect():
    # The first connection: caching_sha2_password full authentication on a
    # fresh sidecar, with the RSA key fetched over plain TCP.
    conn = connect()
    answer = query(conn, "SELECT 1")
    conn.close()
    return answer


def check_tls():
    if env("MQ_TLS") != "1":
        raise Skip("MQ_TLS=0")
    conn = connect(ssl_ca=env("MQ_TLS_CA"), ssl_verify_cert=True, ssl_verify_identity=True)
    encrypted = isinstance(conn._sock, ssl.SSLSocket)
    answer = query(conn, "SELECT 'over tls' AS t")
    conn.close()
    return {"encrypted": encrypted, "result": answer}


def types(write):
    conn = connect()
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {P}_types")
        cur.execute(TYPES_DDL.format(p=P))
    written = write(conn)
    read = query(conn, f"SELECT * FROM {P}_types WHERE id >= %s ORDER BY id", (1,))
    conn.close()
    return {"written": written, "read": read}


def check_types_text():
    return types(lambda conn: query(conn, TYPES_LITERAL.format(p=P)))


def check_types_prepared():
    def write(conn):
        marks = ", ".join(["%s"] * 29)
        with conn.cursor() as cur:
            n = cur.executemany(f"INSERT INTO {P}_types VALUES ({marks})", TYPES_PARAMS)
        return {"rowcount": n}
    return types(write)


def count(conn, table):
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {table}")
        return cur.fetchone()[0]


def check_transactions():
    t = f"{P}_tx"
    conn, other = connect(), connect(autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {t}")
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)")
        conn.begin()
        cur.execute(f"INSERT INTO {t} VALUES (%s)", (1,))
        unseen = count(other, t)
        conn.commit()
        committed = count(other, t)
        conn.begin()
        cur.execute(f"INSERT INTO {t} VALUES (2)")
        conn.rollback()
        rolled_back = count(other, t)
        conn.autocommit(False)
        cur.execute(f"INSERT INTO {t} VALUES (3)")
        before = count(other, t)
        conn.commit()
        after = count(other, t)
    return {"uncommitted_seen_by_other": unseen, "after_commit": committed,
            "after_rollback": rolled_back, "autocommit_off_before_commit": before,
            "autocommit_off_after_commit": after}


def check_errors():
    t = f"{P}_err"
    conn = connect(autocommit=True)
    out = []
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {t}")
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)")
        cur.execute(f"INSERT INTO {t} VALUES (1)")
        for sql in (f"INSERT INTO {t} VALUES (1)", "SELEC 1", f"SELECT * FROM {P}_no_such_table"):
            try:
                cur.execute(sql)
                out.append(None)
            except pymysql.MySQLError as e:
                out.append(error(e))
        cur.execute("SELECT 2")
        after = cur.fetchone()[0]
    return {"errors": out, "still_works": after}


def result_sets(cur):
    sets = [{"description": description(cur), "rows": rows(cur.fetchall()), "rowcount": cur.rowcount}]
    while cur.nextset():
        sets.append({"description": description(cur), "rows": rows(cur.fetchall()),
                     "rowcount": cur.rowcount})
    return sets


def check_procedure():
    conn = connect(autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"DROP PROCEDURE IF EXISTS {P}_two")
        cur.execute(PROCEDURE.format(p=P))
        cur.execute(f"CALL {P}_two(41)")
        called = result_sets(cur)
        cur.callproc(f"{P}_two", (7,))
        callproc = result_sets(cur)
    return {"call": called, "callproc": callproc}


def check_multi_statement():
    t = f"{P}_multi"
    conn = connect(autocommit=True, client_flag=CLIENT.MULTI_STATEMENTS)
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {t}")
        cur.execute(f"CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)")
        cur.execute(f"SELECT 1 AS one; INSERT INTO {t} (v) VALUES ('x'), ('y'); "
                    f"SELECT * FROM {t} ORDER BY id")
        ok = result_sets(cur)
        try:
            cur.execute(f"SELECT 1; SELECT * FROM {P}_missing; SELECT 3")
            failing = result_sets(cur)
        except pymysql.MySQLError as e:
            failing = error(e)
    # Without the option, the server refuses the second statement.
    plain = connect(autocommit=True)
    refused = []
    with plain.cursor() as cur:
        for sql in ("SELECT 1; SELECT 2",
                    "SELECT 1;\n\n   SELECT '" + "long " * 30 + "' AS x",
                    f"INSERT INTO {t} (v) VALUES ('z'); DROP TABLE {t}"):
            try:
                cur.execute(sql)
                refused.append(result_sets(cur))
            except pymysql.MySQLError as e:
                refused.append(error(e))
        cur.execute(f"SELECT COUNT(*) FROM {t}")
        rows_after = cur.fetchone()[0]
    return {"results": ok, "error_midway": failing, "without_option": refused,
            "rows_after_refusals": rows_after}


def check_large_result():
    conn = connect(autocommit=True)
    with conn.cursor() as cur:
        for sql in big_table_sql(P, int(env("MQ_BIG_ROWS"))):
            cur.execute(sql)
    # Unbuffered, as PyMySQL's users read large results.
    with conn.cursor(pymysql.cursors.SSCursor) as cur:
        cur.execute(f"SELECT id, v FROM {P}_big ORDER BY id")
        answer = digest(cur)
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE {P}_big")
    return answer


def check_last_insert_id():
    t = f"{P}_ai"
    conn = connect(autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {t}")
        cur.execute(f"CREATE TABLE {t} (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 1000")
        cur.execute(f"INSERT INTO {t} (v) VALUES (%s), (%s)", (1, 2))
        lastrowid, insert_id = cur.lastrowid, conn.insert_id()
        cur.execute("SELECT LAST_INSERT_ID()")
        sql = cur.fetchone()[0]
    return {"lastrowid": lastrowid, "insert_id": insert_id, "last_insert_id": sql}


def database(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT DATABASE()")
        return cur.fetchone()[0]


def check_switch_database():
    conn = connect()
    start = database(conn)
    conn.select_db(env("MQ_OTHER_DATABASE"))  # COM_INIT_DB
    switched = database(conn)
    with conn.cursor() as cur:
        cur.execute(f"USE `{env('MQ_DATABASE')}`")
    back = database(conn)
    try:
        conn.select_db("no_such_database")
        unknown = None
    except pymysql.MySQLError as e:
        unknown = error(e)
    return {"start": start, "switched": switched, "back": back, "unknown": unknown}


def check_pool_reset_ping():
    # PyMySQL has no pool and no reset: ping keeps the session.
    conn = connect()
    with conn.cursor() as cur:
        cur.execute("SET @matrix = 42")
    conn.ping(reconnect=False)
    with conn.cursor() as cur:
        cur.execute("SELECT @matrix")
        after_ping = cur.fetchone()[0]
    return {"ping": True, "variable_after_ping": after_ping, "open": conn.open}


def check_cursor():
    raise Skip("PyMySQL has no server-side cursors (SSCursor streams an unbuffered text result)")


# Multibyte character sets whose characters may end in 0x5C ("\\"). Each
# value is a character of the set, then a quote: escaped correctly by the
# driver, the whole value is one string literal to a server that reads the
# text in that character set, so no row matches. A proxy that alters the
# bytes (or scans them as another character set) turns it into code.
CHARSET_ATTACKS = {
    # The attack as reported: 0xE581 in gbk, before an escaped quote.
    "gbk": [b"\xe5\x81".decode("gbk"), b"\x95\x5c".decode("gbk")],
    "big5": [b"\xa4\x40".decode("big5"), b"\xa5\x5c".decode("big5")],
    "sjis": [b"\x88\x9f".decode("shift_jis"), b"\x95\x5c".decode("shift_jis")],
}


def check_charset_injection():
    t = f"{P}_owners"
    setup = connect(autocommit=True)
    with setup.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {t}")
        cur.execute(f"CREATE TABLE {t} (owner VARCHAR(64), secret VARCHAR(64)) CHARSET utf8mb4")
        cur.execute(f"INSERT INTO {t} VALUES ('alice', 's1'), ('bob', 's2')")
    setup.close()
    answers = {}
    for charset, leads in CHARSET_ATTACKS.items():
        conn = connect(autocommit=True, charset=charset)
        for k, lead in enumerate(leads):
            for tail in ("' OR 1=1 -- ", "'; SELECT 'second' -- "):
                try:
                    answers[f"{charset}/{k}/{tail[:3]}"] = query(
                        conn, f"SELECT owner, secret FROM {t} WHERE owner = %s", (lead + tail,))
                except pymysql.MySQLError as e:
                    answers[f"{charset}/{k}/{tail[:3]}"] = error(e)
        # The characters themselves cross intact, both ways.
        answers[f"{charset}/echo"] = query(conn, "SELECT %s AS v, HEX(%s) AS h", (leads[1], leads[1]))
        conn.close()
    # latin1 text is stored as latin1 means it, not as U+FFFD.
    conn = connect(autocommit=True, charset="latin1")
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {t} VALUES (%s, 'latin1')", ("caf\u00e9",))
    answers["latin1"] = query(conn, f"SELECT owner, HEX(owner) FROM {t} WHERE secret = 'latin1'")
    conn.close()
    return answers


def check_no_backslash_escapes():
    # PyMySQL escapes by the status flag SERVER_STATUS_NO_BACKSLASH_ESCAPES:
    # a server (or proxy) that does not report the mode gets backslash
    # escaping, which this mode reads as a quote that ends the string.
    t = f"{P}_nbe"
    conn = connect(autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {t}")
        cur.execute(f"CREATE TABLE {t} (owner VARCHAR(64))")
        cur.execute(f"INSERT INTO {t} VALUES ('alice'), ('bob')")
        cur.execute("SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'")
    flag = bool(conn.server_status & 0x0200)
    answers = {"flag_after_set": flag}
    for value in ("\\' OR 1=1 -- ", "x\\", "it's"):
        try:
            answers[value] = query(conn, f"SELECT owner FROM {t} WHERE owner = %s", (value,))
        except pymysql.MySQLError as e:
            answers[value] = error(e)
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = DEFAULT")
    answers["flag_after_default"] = bool(conn.server_status & 0x0200)
    conn.close()
    return answers


def check_bytes_in_sql_text():
    # Binary values in the text protocol (PyMySQL sends bytes as
    # _binary'…' with the raw bytes in the statement), and SQL text that is
    # not valid in its character set, which the server must refuse itself.
    t = f"{P}_bin"
    conn = connect(autocommit=True)
    answers = {}
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {t}")
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, b VARBINARY(300))")
        cur.execute(f"INSERT INTO {t} VALUES (1, %s), (2, %s)", (b"\x00F\xfe", bytes(range(256))))
        cur.execute(f"SELECT id, LENGTH(b), HEX(b), b FROM {t} ORDER BY id")
        answers["binary"] = rows(cur.fetchall())
        # Bytes, which PyMySQL sends as they are.
        for sql in (b"SET NAMES utf8", f"DROP TABLE IF EXISTS {P}_comment".encode(),
                    f"CREATE TABLE {P}_comment (x INT COMMENT 'a".encode() + b"\xff')"):
            try:
                cur.execute(sql)
                answers[sql.hex()] = "ok"
            except pymysql.MySQLError as e:
                answers[sql.hex()] = error(e)
    conn.close()
    return answers


def check_multibyte_comment():
    # Statements led by a keyword and followed by non-ASCII comments once
    # killed the connection (and left its transaction open).
    t = f"{P}_mbc"
    conn = connect()
    answers = []
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {t}")
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)")
        for sql in ("BEGIN /* Привет мир */", f"INSERT INTO {t} VALUES (1)",
                    "COMMIT -- 開始トランザクション", "BEGIN -- 開始トランザクション",
                    f"INSERT INTO {t} VALUES (2)", "ROLLBACK /* début */",
                    f"SELECT id FROM {t} /* ☃ */ ORDER BY id"):
            try:
                cur.execute(sql)
                answers.append([sql, rows(cur.fetchall())])
            except pymysql.MySQLError as e:
                answers.append([sql, error(e)])
    conn.close()
    return answers


def check_found_rows():
    # Affected rows count rows changed, unless the client set
    # CLIENT_FOUND_ROWS (then rows matched), as the flag was negotiated.
    t = f"{P}_found"
    answers = {}
    for name, flag in (("default", 0), ("found_rows", CLIENT.FOUND_ROWS)):
        conn = connect(autocommit=True, client_flag=flag)
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {t}")
            cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
            cur.execute(f"INSERT INTO {t} VALUES (1, 0), (2, 1), (3, 1)")
            update = cur.execute(f"UPDATE {t} SET v = 1")
            same = cur.execute(f"INSERT INTO {t} VALUES (1, 1) ON DUPLICATE KEY UPDATE v = 1")
            changed = cur.execute(f"INSERT INTO {t} VALUES (1, 1) ON DUPLICATE KEY UPDATE v = 2")
            cur.execute("SELECT ROW_COUNT()")
            row_count = cur.fetchone()[0]
        answers[name] = {"update": update, "upsert_same": same, "upsert_changed": changed,
                         "row_count": row_count}
        conn.close()
    return answers


def check_unknown_database():
    # Refused at connect, as a server refuses it (1049; 1044 where the
    # account has no grant), not at the first statement.
    out = {}
    for db in (f"{P}_no_such_database", "mysql", env("MQ_OTHER_DATABASE")):
        for attempt in (1, 2):
            try:
                conn = connect(database=db)
                out[f"{db}/{attempt}"] = query(conn, "SELECT DATABASE()")
                conn.close()
            except pymysql.MySQLError as e:
                out[f"{db}/{attempt}"] = error(e)
    return out


def check_large_packets():
    # Values of 16 MiB and more (several MySQL packets) both ways: PyMySQL
    # escapes them into the statement text (`_binary'…'`) and reads them
    # back as rows of several packets.
    conn = connect(autocommit=True)
    out = {}
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {P}_bigval")
        cur.execute(f"CREATE TABLE {P}_bigval (id INT PRIMARY KEY, v LONGBLOB)")
        for i, size in enumerate(((1 << 24) - 1, (1 << 24) + 1)):
            value = (bytes(range(i, 256)) + bytes(range(i))) * (size // 256 + 1)
            value = value[:size]
            cur.execute(f"INSERT INTO {P}_bigval VALUES (%s, %s)", (i, value))
            cur.execute(f"SELECT v, LENGTH(v) FROM {P}_bigval WHERE id = %s", (i,))
            got, length = cur.fetchone()
            out[str(size)] = {"length": length, "same_bytes": got == value}
        cur.execute(f"DROP TABLE {P}_bigval")
    conn.close()
    return out


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
    ("charset_injection", check_charset_injection),
    ("no_backslash_escapes", check_no_backslash_escapes),
    ("bytes_in_sql_text", check_bytes_in_sql_text),
    ("multibyte_comment", check_multibyte_comment),
    ("found_rows", check_found_rows),
    ("unknown_database", check_unknown_database),
    ("large_packets", check_large_packets),
])
