"""mysqlclient (MySQLdb, Django's MySQL driver: a C extension over
libmariadb) through the matrix checks (contract: tests/matrix/README.md).
MySQLdb has no server-side prepared statements: `types_prepared` uses its
parameterised queries, which libmariadb's mysql_real_escape_string escapes
into the statement text (by the session's character set and the server's
NO_BACKSLASH_ESCAPES status flag)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import MySQLdb  # noqa: E402
import MySQLdb.cursors  # noqa: E402
from MySQLdb.constants import CLIENT  # noqa: E402

from matrix_common import (  # noqa: E402
    PROCEDURE, TYPES_DDL, TYPES_LITERAL, TYPES_PARAMS, Skip, big_table_sql, description,
    digest, env, rows, run,
)

P = "mysqlclient"


def connect(**kw):
    args = dict(host=env("MQ_HOST"), port=int(env("MQ_PORT")), user=env("MQ_USER"),
                password=env("MQ_PASSWORD"), database=env("MQ_DATABASE"), charset="utf8mb4")
    args.update(kw)
    return MySQLdb.connect(**args)


def result(conn, cur):
    return {"description": description(cur), "rows": rows(cur.fetchall()),
            "rowcount": cur.rowcount, "lastrowid": cur.lastrowid,
            "warnings": conn.warning_count(), "info": conn.info()}


def query(conn, sql, params=None):
    cur = conn.cursor()
    cur.execute(sql, params)
    answer = result(conn, cur)
    cur.close()
    return answer


def error(e, conn=None):
    out = {"errno": e.args[0], "message": e.args[1] if len(e.args) > 1 else None,
           "class": type(e).__name__}
    if conn is not None:
        out["sqlstate"] = conn.sqlstate()
    return out


def check_connect():
    # The first connection: caching_sha2_password full authentication on a
    # fresh sidecar (libmariadb asks for the server's RSA key over plain TCP).
    conn = connect()
    answer = query(conn, "SELECT 1")
    answer["server_info"] = conn.get_server_info()
    answer["proto_info"] = conn.get_proto_info()
    answer["character_set"] = conn.character_set_name()
    answer["autocommit"] = conn.get_autocommit()
    conn.close()
    return answer


def check_tls():
    if env("MQ_TLS") != "1":
        raise Skip("MQ_TLS=0")
    conn = connect(ssl={"ca": env("MQ_TLS_CA")}, ssl_mode="VERIFY_IDENTITY")
    answer = query(conn, "SELECT 'over tls' AS t")
    cur = conn.cursor()
    cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
    encrypted = cur.fetchone()[1] != ""
    conn.close()
    return {"encrypted": encrypted, "result": answer}


def types(write):
    conn = connect(autocommit=True)
    cur = conn.cursor()
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
        cur = conn.cursor()
        n = cur.executemany(f"INSERT INTO {P}_types VALUES ({marks})", TYPES_PARAMS)
        return {"rowcount": n, "warnings": conn.warning_count(), "info": conn.info()}
    return types(write)


def count(conn, table):
    cur = conn.cursor()
    cur.execute(f"SELECT COUNT(*) FROM {table}")
    return cur.fetchone()[0]


def check_transactions():
    t = f"{P}_tx"
    conn, other = connect(), connect(autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)")
    autocommit_default = conn.get_autocommit()
    conn.begin()
    cur.execute(f"INSERT INTO {t} VALUES (%s)", (1,))
    unseen = count(other, t)
    conn.commit()
    committed = count(other, t)
    conn.begin()
    cur.execute(f"INSERT INTO {t} VALUES (2)")
    conn.rollback()
    rolled_back = count(other, t)
    conn.autocommit(True)
    on = conn.get_autocommit()
    conn.autocommit(False)
    cur.execute(f"INSERT INTO {t} VALUES (3)")
    before = count(other, t)
    conn.commit()
    after = count(other, t)
    return {"autocommit_default": autocommit_default, "uncommitted_seen_by_other": unseen,
            "after_commit": committed, "after_rollback": rolled_back, "autocommit_on": on,
            "autocommit_off_before_commit": before, "autocommit_off_after_commit": after,
            "autocommit_off": conn.get_autocommit()}


def check_errors():
    t = f"{P}_err"
    conn = connect(autocommit=True)
    out = []
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)")
    cur.execute(f"INSERT INTO {t} VALUES (1)")
    for sql in (f"INSERT INTO {t} VALUES (1)", "SELEC 1", f"SELECT * FROM {P}_no_such_table",
                "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'custom', MYSQL_ERRNO = 1644"):
        try:
            cur.execute(sql)
            out.append(None)
        except MySQLdb.MySQLError as e:
            out.append(error(e, conn))
    cur.execute("SELECT 2")
    after = cur.fetchone()[0]
    cur.execute("SELECT CAST('x' AS SIGNED)")
    cur.fetchall()
    warnings = conn.show_warnings()
    return {"errors": out, "still_works": after, "warnings": [list(w) for w in warnings]}


def result_sets(conn, cur):
    sets = [result(conn, cur)]
    while cur.nextset():
        sets.append(result(conn, cur))
    return sets


def check_procedure():
    conn = connect(autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP PROCEDURE IF EXISTS {P}_two")
    cur.execute(PROCEDURE.format(p=P))
    cur.execute(f"CALL {P}_two(41)")
    called = result_sets(conn, cur)
    # callproc sets @_<name>_<n> to each argument and CALLs with them, so
    # OUT parameters are read back with a SELECT of those variables.
    cur.execute(f"DROP PROCEDURE IF EXISTS {P}_out")
    cur.execute(f"CREATE PROCEDURE {P}_out(IN a INT, OUT b INT, INOUT c VARCHAR(20)) "
                "BEGIN SET b = a * 2; SET c = CONCAT(c, '!'); SELECT a AS inside; END")
    args = cur.callproc(f"{P}_out", (21, None, "hi"))
    callproc = result_sets(conn, cur)
    cur.execute(f"SELECT @_{P}_out_0, @_{P}_out_1, @_{P}_out_2")
    out_params = rows(cur.fetchall())
    return {"call": called, "callproc_args": list(args), "callproc": callproc,
            "out_params": out_params}


def check_multi_statement():
    # mysqlclient enables CLIENT_MULTI_STATEMENTS unless told
    # multi_statements=False.
    t = f"{P}_multi"
    conn = connect(autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(f"CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)")
    cur.execute(f"SELECT 1 AS one; INSERT INTO {t} (v) VALUES ('x'), ('y'); "
                f"SELECT * FROM {t} ORDER BY id")
    ok = result_sets(conn, cur)
    try:
        cur.execute(f"SELECT 1; SELECT * FROM {P}_missing; SELECT 3")
        failing = result_sets(conn, cur)
    except MySQLdb.MySQLError as e:
        failing = error(e, conn)
    cur.execute("SELECT 'after'")
    after = rows(cur.fetchall())
    # Without the option, the server refuses the second statement.
    plain = connect(autocommit=True, multi_statements=False)
    refused = []
    cur = plain.cursor()
    for sql in ("SELECT 1; SELECT 2",
                "SELECT 1;\n\n   SELECT '" + "long " * 30 + "' AS x",
                f"INSERT INTO {t} (v) VALUES ('z'); DROP TABLE {t}"):
        try:
            cur.execute(sql)
            refused.append(result_sets(plain, cur))
        except MySQLdb.MySQLError as e:
            refused.append(error(e, plain))
    cur.execute(f"SELECT COUNT(*) FROM {t}")
    rows_after = cur.fetchone()[0]
    return {"results": ok, "error_midway": failing, "after_error": after,
            "without_option": refused, "rows_after_refusals": rows_after}


def check_large_result():
    conn = connect(autocommit=True)
    cur = conn.cursor()
    for sql in big_table_sql(P, int(env("MQ_BIG_ROWS"))):
        cur.execute(sql)
    # Unbuffered (mysql_use_result), as large results are read with it.
    cur = conn.cursor(MySQLdb.cursors.SSCursor)
    cur.execute(f"SELECT id, v FROM {P}_big ORDER BY id")
    answer = digest(cur)
    cur.close()
    cur = conn.cursor()
    cur.execute(f"DROP TABLE {P}_big")
    return answer


def check_last_insert_id():
    t = f"{P}_ai"
    conn = connect(autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(f"CREATE TABLE {t} (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 1000")
    cur.execute(f"INSERT INTO {t} (v) VALUES (%s), (%s)", (1, 2))
    lastrowid, insert_id = cur.lastrowid, conn.insert_id()
    cur.executemany(f"INSERT INTO {t} (v) VALUES (%s)", [(3,), (4,), (5,)])
    many = {"rowcount": cur.rowcount, "lastrowid": cur.lastrowid, "insert_id": conn.insert_id()}
    cur.execute("SELECT LAST_INSERT_ID()")
    sql = cur.fetchone()[0]
    return {"lastrowid": lastrowid, "insert_id": insert_id, "executemany": many,
            "last_insert_id": sql}


def database(conn):
    cur = conn.cursor()
    cur.execute("SELECT DATABASE()")
    return cur.fetchone()[0]


def check_switch_database():
    conn = connect()
    start = database(conn)
    conn.select_db(env("MQ_OTHER_DATABASE"))  # COM_INIT_DB
    switched = database(conn)
    conn.cursor().execute(f"USE `{env('MQ_DATABASE')}`")
    back = database(conn)
    try:
        conn.select_db("no_such_database")
        unknown = None
    except MySQLdb.MySQLError as e:
        unknown = error(e, conn)
    return {"start": start, "switched": switched, "back": back, "unknown": unknown,
            "after_unknown": database(conn)}


def check_pool_reset_ping():
    # MySQLdb has no pool and no reset: ping keeps the session;
    # change_user (COM_CHANGE_USER, what pools reset with) does not.
    conn = connect()
    cur = conn.cursor()
    cur.execute("SET @matrix = 42")
    ping = conn.ping()
    cur.execute("SELECT @matrix")
    after_ping = cur.fetchone()[0]
    conn.change_user(env("MQ_USER"), env("MQ_PASSWORD"), env("MQ_OTHER_DATABASE"))
    cur = conn.cursor()
    cur.execute("SELECT @matrix, DATABASE()")
    after_change_user = rows(cur.fetchall())
    return {"ping": ping, "variable_after_ping": after_ping,
            "after_change_user": after_change_user}


def check_cursor():
    raise Skip("MySQLdb has no server-side cursors (SSCursor streams an unbuffered text result)")


# Multibyte character sets whose characters may end in 0x5C ("\\"), as in
# PyMySQL's check: escaped by libmariadb for the connection's character
# set, the whole value stays one string literal.
CHARSET_ATTACKS = {
    "gbk": [b"\xe5\x81".decode("gbk"), b"\x95\x5c".decode("gbk")],
    "big5": [b"\xa4\x40".decode("big5"), b"\xa5\x5c".decode("big5")],
    "sjis": [b"\x88\x9f".decode("shift_jis"), b"\x95\x5c".decode("shift_jis")],
}


def check_charset_injection():
    t = f"{P}_owners"
    setup = connect(autocommit=True)
    cur = setup.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(f"CREATE TABLE {t} (owner VARCHAR(64), secret VARCHAR(64)) CHARSET utf8mb4")
    cur.execute(f"INSERT INTO {t} VALUES ('alice', 's1'), ('bob', 's2')")
    setup.close()
    answers = {}
    for charset, leads in CHARSET_ATTACKS.items():
        conn = connect(autocommit=True, charset=charset)
        for k, lead in enumerate(leads):
            for tail in ("' OR 1=1 -- ", "'; SELECT 'second' -- "):
                key = f"{charset}/{k}/{tail[:3]}"
                try:
                    answers[key] = query(
                        conn, f"SELECT owner, secret FROM {t} WHERE owner = %s", (lead + tail,))
                except MySQLdb.MySQLError as e:
                    answers[key] = error(e, conn)
        answers[f"{charset}/echo"] = query(conn, "SELECT %s AS v, HEX(%s) AS h", (leads[1], leads[1]))
        conn.close()
    conn = connect(autocommit=True, charset="latin1")
    conn.cursor().execute(f"INSERT INTO {t} VALUES (%s, 'latin1')", ("caf\u00e9",))
    answers["latin1"] = query(conn, f"SELECT owner, HEX(owner) FROM {t} WHERE secret = 'latin1'")
    conn.close()
    return answers


def check_no_backslash_escapes():
    # libmariadb's mysql_real_escape_string escapes by the status flag
    # SERVER_STATUS_NO_BACKSLASH_ESCAPES of the last answer: a server (or
    # proxy) that does not report the mode gets backslash escaping, which
    # this mode reads as a quote that ends the string.
    t = f"{P}_nbe"
    conn = connect(autocommit=True)
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(f"CREATE TABLE {t} (owner VARCHAR(64))")
    cur.execute(f"INSERT INTO {t} VALUES ('alice'), ('bob')")
    cur.execute("SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'")
    answers = {"escaped_after_set": conn.escape_string("a'b\\").decode()}
    for value in ("\\' OR 1=1 -- ", "x\\", "it's"):
        try:
            answers[value] = query(conn, f"SELECT owner FROM {t} WHERE owner = %s", (value,))
        except MySQLdb.MySQLError as e:
            answers[value] = error(e, conn)
    cur.execute("SET SESSION sql_mode = DEFAULT")
    answers["escaped_after_default"] = conn.escape_string("a'b\\").decode()
    conn.close()
    return answers


def check_bytes_in_sql_text():
    # Issue 12: a Django BinaryField holding b'\x00F\xfe' (mysqlclient's
    # default settings; Django's own connection adds binary_prefix=False),
    # and with binary_prefix=True (`_binary'…'`), then SQL text that is not
    # valid in its character set, which the server must refuse itself.
    t = f"{P}_bin"
    answers = {}
    for prefix in (False, True):
        conn = connect(autocommit=True, binary_prefix=prefix)
        cur = conn.cursor()
        cur.execute(f"DROP TABLE IF EXISTS {t}")
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, b LONGBLOB, vb VARBINARY(300))")
        try:
            cur.execute(f"INSERT INTO {t} VALUES (1, %s, %s), (2, %s, %s)",
                        (b"\x00F\xfe", b"\x00F\xfe", bytes(range(256)), bytes(range(256))))
            inserted = {"rowcount": cur.rowcount, "warnings": conn.warning_count()}
            shown = [list(w) for w in conn.show_warnings()]
        except MySQLdb.MySQLError as e:
            inserted, shown = error(e, conn), []
        cur.execute(f"SELECT id, LENGTH(b), HEX(b), b, HEX(vb), vb FROM {t} ORDER BY id")
        answers[f"binary_prefix={prefix}"] = {"insert": inserted, "warnings": shown,
                                              "rows": rows(cur.fetchall())}
        conn.close()
    # As Django's MySQL backend connects (charset utf8, CLIENT_FOUND_ROWS)
    # and writes a BinaryField (`_binary %s`).
    conn = connect(autocommit=True, charset="utf8", client_flag=CLIENT.FOUND_ROWS)
    cur = conn.cursor()
    cur.execute(f"UPDATE {t} SET b = _binary %s, vb = _binary %s WHERE id = %s",
                (b"\x00F\xfe", b"\xfe\x00F", 1))
    updated = {"rowcount": cur.rowcount, "warnings": conn.warning_count()}
    cur.execute(f"SELECT HEX(b), b, HEX(vb), vb FROM {t} WHERE id = _binary %s", (b"1",))
    answers["django"] = {"update": updated, "rows": rows(cur.fetchall())}
    conn.close()
    conn = connect(autocommit=True)
    cur = conn.cursor()
    for sql in (b"SET NAMES utf8", f"DROP TABLE IF EXISTS {P}_comment".encode(),
                f"CREATE TABLE {P}_comment (x INT COMMENT 'a".encode() + b"\xff')"):
        try:
            cur.execute(sql)
            answers[sql.hex()] = "ok"
        except MySQLdb.MySQLError as e:
            answers[sql.hex()] = error(e, conn)
    conn.close()
    return answers


def check_multibyte_comment():
    t = f"{P}_mbc"
    conn = connect()
    answers = []
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY)")
    for sql in ("BEGIN /* Привет мир */", f"INSERT INTO {t} VALUES (1)",
                "COMMIT -- 開始トランザクション", "BEGIN -- 開始トランザクション",
                f"INSERT INTO {t} VALUES (2)", "ROLLBACK /* début */",
                f"SELECT id FROM {t} /* ☃ */ ORDER BY id"):
        try:
            cur.execute(sql)
            answers.append([sql, rows(cur.fetchall())])
        except MySQLdb.MySQLError as e:
            answers.append([sql, error(e, conn)])
    conn.close()
    return answers


def check_found_rows():
    # Django connects with client_flag=CLIENT.FOUND_ROWS; MySQLdb's default
    # does not set it.
    t = f"{P}_found"
    answers = {}
    for name, flag in (("default", 0), ("found_rows", CLIENT.FOUND_ROWS)):
        conn = connect(autocommit=True, client_flag=flag)
        cur = conn.cursor()
        cur.execute(f"DROP TABLE IF EXISTS {t}")
        cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO {t} VALUES (1, 0), (2, 1), (3, 1)")
        update = cur.execute(f"UPDATE {t} SET v = 1")
        info = conn.info()
        same = cur.execute(f"INSERT INTO {t} VALUES (1, 1) ON DUPLICATE KEY UPDATE v = 1")
        changed = cur.execute(f"INSERT INTO {t} VALUES (1, 1) ON DUPLICATE KEY UPDATE v = 2")
        cur.execute("SELECT ROW_COUNT()")
        row_count = cur.fetchone()[0]
        answers[name] = {"update": update, "update_info": info, "upsert_same": same,
                         "upsert_changed": changed, "row_count": row_count}
        conn.close()
    return answers


def check_unknown_database():
    out = {}
    for db in (f"{P}_no_such_database", "mysql", env("MQ_OTHER_DATABASE")):
        for attempt in (1, 2):
            try:
                conn = connect(database=db)
                out[f"{db}/{attempt}"] = query(conn, "SELECT DATABASE()")
                conn.close()
            except MySQLdb.MySQLError as e:
                out[f"{db}/{attempt}"] = error(e)
    return out


def check_large_packets():
    # Values of 16 MiB and more (several MySQL packets) both ways, escaped
    # into the statement text by libmariadb.
    conn = connect(autocommit=True, binary_prefix=True)
    out = {}
    cur = conn.cursor()
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
