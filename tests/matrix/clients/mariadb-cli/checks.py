"""The `mariadb` command-line client (batch mode) through the matrix checks
(contract: tests/matrix/README.md). Scripts go in on stdin with --force, as
`-e` stops at the first error; an answer is what the client prints (stdout
and stderr, with --column-type-info metadata and --show-warnings). The CLI
uses TLS whenever the server offers it (unverified by default), which is
also how it passes caching_sha2_password full authentication: it cannot
fetch the server's RSA key. Needs only Python's standard library."""

import hashlib
import json
import os
import re
import subprocess
import sys
import traceback

ENV = os.environ
P = "mariadb_cli"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

from matrix_common import PROCEDURE, TYPES_DDL, TYPES_LITERAL  # noqa: E402


class Skip(Exception):
    pass


def mariadb(script, *extra, database=None):
    """Runs a script; returns (exit code, stdout, stderr)."""
    # --table: batch mode prints --column-type-info only with tables.
    cmd = ["mariadb", "--no-defaults", "--batch", "--table", "--force", "--column-type-info",
           "--show-warnings", "--binary-as-hex", "--default-character-set=utf8mb4",
           f"--host={ENV['MQ_HOST']}", f"--port={ENV['MQ_PORT']}", "--protocol=TCP",
           f"--user={ENV['MQ_USER']}", f"--password={ENV['MQ_PASSWORD']}", *extra,
           database or ENV["MQ_DATABASE"]]
    p = subprocess.run(cmd, input=script.encode(), capture_output=True, timeout=300)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def answer(script, *extra, **kw):
    # `DROP … IF EXISTS` notes depend on what an earlier run left behind:
    # those statements run first, on their own, outside the answer.
    lines = script.split("\n")
    drops = [line for line in lines if line.startswith("DROP ") and " IF EXISTS " in line]
    if drops:
        mariadb("\n".join(drops) + "\n")
        script = "\n".join(line for line in lines if line not in drops)
    code, out, err = mariadb(script, *extra, **kw)
    return {"exit": code, "stdout": out.splitlines(), "stderr": err.splitlines()}


def check_connect():
    return answer("SELECT 1;")


def check_tls():
    if ENV["MQ_TLS"] != "1":
        raise Skip("MQ_TLS=0")
    code, out, err = mariadb("SELECT 'over tls' AS t;\nstatus\n",
                             f"--ssl-ca={ENV['MQ_TLS_CA']}", "--ssl-verify-server-cert")
    # `status` reports the client's side of the connection; keep only
    # whether a cipher is in use (which one may differ).
    ssl_line = [line for line in out.splitlines() if line.startswith("SSL:")]
    encrypted = bool(ssl_line) and "Cipher in use is" in ssl_line[0]
    result = out.split("--------------")[0].splitlines()
    return {"exit": code, "encrypted": encrypted, "result": result, "stderr": err.splitlines()}


def check_types_text():
    return answer(f"DROP TABLE IF EXISTS {P}_types;\n{TYPES_DDL.format(p=P)};\n"
                  f"{TYPES_LITERAL.format(p=P)};\nSELECT * FROM {P}_types ORDER BY id;\n")


def check_types_prepared():
    # The CLI's parameterised statements: PREPARE / EXECUTE … USING.
    values = [
        ["1", "-128", "0", "-32768", "0", "-8388608", "0", "-2147483648", "0",
         "-9223372036854775808", "0",
         "-99999999999999999999999999999999999.999999999999999999999999999999",
         "-3.40282e38", "-1.7976931348623157e308", "DATE'1000-01-01'",
         "TIMESTAMP'1000-01-01 00:00:00'", "TIMESTAMP'2001-02-03 04:05:06.000007'",
         "TIME'-838:59:59'", "1901", "'chär'", "'emoji 🐬 ok'", "'text ✓ 🐬'",
         "X'000102030405060708090a0b0c0d0e0f'", "X'" + bytes(range(256)).hex() + "'",
         "X'" + bytes(range(256)).hex() + "'", "'{\"k\": [1, 2.5, \"v\", null]}'", "'a'",
         "'x,z'", "b'0'"],
        ["2", "127", "255", "32767", "65535", "8388607", "16777215", "2147483647",
         "4294967295", "9223372036854775807", "18446744073709551615",
         "99999999999999999999999999999999999.999999999999999999999999999999",
         "3.40282e38", "1.7976931348623157e308", "DATE'9999-12-31'",
         "TIMESTAMP'9999-12-31 23:59:59.999999'", "TIMESTAMP'2024-02-29 23:59:59.999999'",
         "TIME'838:59:59'", "2155", "''", "'🐬'", "''", "X'ffffffffffffffffffffffffffffffff'",
         "X''", "X''", "'[]'", "'c'", "'x,y,z'", "0xffffffffffffffff"],
        ["3"] + ["NULL"] * 28,
    ]
    names = [f"@p{i}" for i in range(29)]
    script = [f"DROP TABLE IF EXISTS {P}_types;", TYPES_DDL.format(p=P) + ";",
              f"PREPARE ins FROM 'INSERT INTO {P}_types VALUES ({', '.join(['?'] * 29)})';"]
    for row in values:
        script.append("SET " + ", ".join(f"{n} = {v}" for n, v in zip(names, row)) + ";")
        script.append(f"EXECUTE ins USING {', '.join(names)};")
    script += [f"PREPARE sel FROM 'SELECT * FROM {P}_types WHERE id >= ? ORDER BY id';",
               "SET @from = 1;", "EXECUTE sel USING @from;", "DEALLOCATE PREPARE ins;",
               "DEALLOCATE PREPARE sel;"]
    return answer("\n".join(script) + "\n")


def check_transactions():
    t = f"{P}_tx"
    return answer(f"""DROP TABLE IF EXISTS {t};
CREATE TABLE {t} (id INT PRIMARY KEY);
BEGIN; INSERT INTO {t} VALUES (1); COMMIT;
SELECT COUNT(*) AS after_commit FROM {t};
START TRANSACTION; INSERT INTO {t} VALUES (2); SELECT COUNT(*) AS inside FROM {t}; ROLLBACK;
SELECT COUNT(*) AS after_rollback FROM {t};
SET autocommit = 0; INSERT INTO {t} VALUES (3); ROLLBACK;
SELECT COUNT(*) AS autocommit_off_rolled_back FROM {t};
INSERT INTO {t} VALUES (4); COMMIT;
SELECT COUNT(*) AS autocommit_off_committed FROM {t};
""")


def check_errors():
    t = f"{P}_err"
    return answer(f"""DROP TABLE IF EXISTS {t};
CREATE TABLE {t} (id INT PRIMARY KEY);
INSERT INTO {t} VALUES (1);
INSERT INTO {t} VALUES (1);
SELEC 1;
SELECT * FROM {P}_no_such_table;
SELECT CAST('12abc' AS INT) AS warned;
SELECT 'still works' AS after;
""")


def check_procedure():
    return answer(f"""DROP PROCEDURE IF EXISTS {P}_two;
DELIMITER //
{PROCEDURE.format(p=P)}//
DELIMITER ;
CALL {P}_two(41);
""")


def check_multi_statement():
    t = f"{P}_multi"
    # With a delimiter of its own, the client sends the three statements
    # as one query (it always enables CLIENT_MULTI_STATEMENTS).
    return answer(f"""DROP TABLE IF EXISTS {t};
CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT);
DELIMITER //
SELECT 1 AS one; INSERT INTO {t} (v) VALUES ('x'), ('y'); SELECT * FROM {t} ORDER BY id//
SELECT 1; SELECT * FROM {P}_missing; SELECT 3//
DELIMITER ;
""")


def check_large_result():
    t = f"{P}_big"
    n = int(ENV["MQ_BIG_ROWS"])
    code, out, err = mariadb(f"""DROP TABLE IF EXISTS {t};
CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(1024));
INSERT INTO {t} SELECT seq, REPEAT(CHAR(65 + seq % 26), 1000) FROM seq_1_to_{n};
""")
    if code != 0:
        raise RuntimeError(err)
    cmd = ["mariadb", "--no-defaults", "--batch", "--skip-column-names",
           f"--host={ENV['MQ_HOST']}", f"--port={ENV['MQ_PORT']}", "--protocol=TCP",
           f"--user={ENV['MQ_USER']}", f"--password={ENV['MQ_PASSWORD']}", ENV["MQ_DATABASE"]]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(f"SELECT id, v FROM {t} ORDER BY id;\nDROP TABLE {t};\n".encode())
    p.stdin.close()
    h, rows = hashlib.sha256(), 0
    for line in p.stdout:
        id_, v = line.rstrip(b"\n").split(b"\t")
        h.update(id_)
        h.update(v)
        rows += 1
    err = p.stderr.read().decode()
    return {"exit": p.wait(), "rows": rows, "sha256": h.hexdigest(), "stderr": err.splitlines()}


def check_last_insert_id():
    t = f"{P}_ai"
    return answer(f"""DROP TABLE IF EXISTS {t};
CREATE TABLE {t} (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 1000;
INSERT INTO {t} (v) VALUES (1), (2);
SELECT LAST_INSERT_ID(), ROW_COUNT();
INSERT INTO {t} (id, v) VALUES (NULL, 3);
SELECT LAST_INSERT_ID(), @@identity, ROW_COUNT();
""")


def check_switch_database():
    # `use` is the client's own command: COM_INIT_DB.
    return answer(f"""SELECT DATABASE();
use {ENV['MQ_OTHER_DATABASE']}
SELECT DATABASE();
use {ENV['MQ_DATABASE']}
SELECT DATABASE();
use no_such_database
SELECT DATABASE();
""")


def check_pool_reset_ping():
    # No pool and no reset command: `connect` opens a new session (user
    # variables gone); mariadb-admin's ping is COM_PING.
    session = answer("SET @matrix = 42;\nSELECT @matrix;\nconnect\nSELECT @matrix;\n")
    ping = subprocess.run(
        ["mariadb-admin", "--no-defaults", f"--host={ENV['MQ_HOST']}", f"--port={ENV['MQ_PORT']}",
         "--protocol=TCP", f"--user={ENV['MQ_USER']}", f"--password={ENV['MQ_PASSWORD']}", "ping"],
        capture_output=True, timeout=60)
    session["stdout"] = [re.sub(r"Connection id:\s+\d+", "Connection id: N", line)
                         for line in session["stdout"]]
    return {"session": session, "ping": [ping.returncode, ping.stdout.decode().strip()]}


def check_cursor():
    raise Skip("the mariadb client has no server-side cursors")


def main():
    for name, fn in [
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
    ]:
        try:
            line = {"check": name, "answer": fn()}
        except Skip as s:
            line = {"check": name, "skip": str(s)}
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            line = {"check": name, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(line, ensure_ascii=False), flush=True)


main()
