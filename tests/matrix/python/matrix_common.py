"""What the Python clients of the matrix share: the contract's environment
and output (tests/matrix/README.md), how values are shown, and the SQL of
the checks. Each driver's own program (clients/<name>/checks.py) uses its
driver's API the way its users do."""

import datetime
import decimal
import hashlib
import json
import os
import sys
import traceback

ENV = os.environ


def env(name):
    return ENV[name]


class Skip(Exception):
    """The client has no such feature."""


def emit(check, **outcome):
    line = dict(check=check, **outcome)
    print(json.dumps(line, default=str, ensure_ascii=False), flush=True)


def run(checks):
    """Runs every check in order, one contract line each."""
    for name, fn in checks:
        try:
            emit(name, answer=fn())
        except Skip as s:
            emit(name, skip=str(s))
        except Exception as e:  # an unexpected failure is the check's error
            traceback.print_exc(file=sys.stderr)
            emit(name, error=f"{type(e).__name__}: {e}")


def val(v):
    """A value as the driver returned it: its Python type and content."""
    if v is None:
        return None
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, int):
        return {"int": str(v)}
    if isinstance(v, float):
        return {"float": repr(v)}
    if isinstance(v, decimal.Decimal):
        return {"Decimal": str(v)}
    if isinstance(v, (bytes, bytearray)):
        return {type(v).__name__: v.hex()}
    if isinstance(v, str):
        return {"str": v}
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return {type(v).__name__: v.isoformat()}
    if isinstance(v, datetime.timedelta):
        return {"timedelta": [v.days, v.seconds, v.microseconds]}
    if isinstance(v, (set, frozenset)):
        return {"set": sorted(v)}
    return {type(v).__name__: repr(v)}


def rows(rs):
    return [[val(v) for v in r] for r in rs]


def description(cur):
    return [list(d) for d in (cur.description or [])]


ALL_BYTES = bytes(range(256))

TYPES_DDL = """CREATE TABLE {p}_types (
  id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
  bi BIGINT, biu BIGINT UNSIGNED,
  de DECIMAL(65,30), f FLOAT, d DOUBLE,
  dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), y YEAR,
  c CHAR(10), vc VARCHAR(100), tx TEXT,
  bn BINARY(16), vb VARBINARY(256), bl BLOB,
  js JSON, en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(64)
) DEFAULT CHARSET utf8mb4"""

_HEX = ALL_BYTES.hex()
TYPES_LITERAL = f"""INSERT INTO {{p}}_types VALUES
(1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
 '-99999999999999999999999999999999999.999999999999999999999999999999', -3.40282e38, -1.7976931348623157e308,
 '1000-01-01', '1000-01-01 00:00:00.000000', '2001-02-03 04:05:06.000007', '-838:59:59.000000', 1901,
 'chär', 'emoji 🐬 ok', 'text ✓ 🐬', X'000102030405060708090a0b0c0d0e0f', X'{_HEX}', X'{_HEX}',
 '{{{{"k": [1, 2.5, "v", null]}}}}', 'a', 'x,z', b'0'),
(2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
 '99999999999999999999999999999999999.999999999999999999999999999999', 3.40282e38, 1.7976931348623157e308,
 '9999-12-31', '9999-12-31 23:59:59.999999', '2024-02-29 23:59:59.999999', '838:59:59.000000', 2155,
 '', '🐬', '', X'ffffffffffffffffffffffffffffffff', X'', X'',
 '[]', 'c', 'x,y,z', b'1111111111111111111111111111111111111111111111111111111111111111'),
(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"""

D = decimal.Decimal
TYPES_PARAMS = [
    (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -(2**63), 0,
     D("-99999999999999999999999999999999999.999999999999999999999999999999"),
     -3.40282e38, -1.7976931348623157e308,
     datetime.date(1000, 1, 1), datetime.datetime(1000, 1, 1),
     datetime.datetime(2001, 2, 3, 4, 5, 6, 7), -datetime.timedelta(hours=838, minutes=59, seconds=59), 1901,
     "chär", "emoji 🐬 ok", "text ✓ 🐬", bytes(range(16)), ALL_BYTES, ALL_BYTES,
     '{"k": [1, 2.5, "v", null]}', "a", "x,z", bytes(8)),
    (2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 2**63 - 1, 2**64 - 1,
     D("99999999999999999999999999999999999.999999999999999999999999999999"),
     3.40282e38, 1.7976931348623157e308,
     datetime.date(9999, 12, 31), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999),
     datetime.datetime(2024, 2, 29, 23, 59, 59, 999999), datetime.timedelta(hours=838, minutes=59, seconds=59), 2155,
     "", "🐬", "", b"\xff" * 16, b"", b"",
     "[]", "c", "x,y,z", b"\xff" * 8),
    (3,) + (None,) * 28,
]


def big_table_sql(p, n):
    return [
        f"DROP TABLE IF EXISTS {p}_big",
        f"CREATE TABLE {p}_big (id INT PRIMARY KEY, v VARCHAR(1024))",
        f"INSERT INTO {p}_big SELECT seq, REPEAT(CHAR(65 + seq % 26), 1000) FROM seq_1_to_{n}",
    ]


def digest(row_iter):
    """Row count and sha256 of the concatenated values (id then v)."""
    h = hashlib.sha256()
    count = 0
    for id_, v in row_iter:
        count += 1
        h.update(str(id_).encode())
        h.update(v.encode() if isinstance(v, str) else bytes(v))
    return {"rows": count, "sha256": h.hexdigest()}


PROCEDURE = "CREATE PROCEDURE {p}_two(IN x INT) BEGIN SELECT x AS a; SELECT x + 1 AS b, 'z' AS c; END"
