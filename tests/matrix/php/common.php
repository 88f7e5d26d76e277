<?php
// What the PHP clients of the matrix share (contract:
// tests/matrix/README.md): the environment, one JSON line per check, how
// values are shown, and the SQL of the checks (the same as
// tests/matrix/python/matrix_common.py). Each client's program uses its
// extension's API the way PHP applications do.

declare(strict_types=1);

final class Skip extends Exception {}

function env(string $name): string
{
    $v = getenv($name);
    if ($v === false) {
        throw new RuntimeException("$name is not set");
    }
    return $v;
}

/// A value as the extension returned it: its PHP type and content;
/// strings that are not UTF-8 as hex (JSON carries only UTF-8).
function val(mixed $v): mixed
{
    if ($v === null) {
        return null;
    }
    if (is_bool($v)) {
        return ['bool' => $v];
    }
    if (is_int($v)) {
        return ['int' => (string) $v];
    }
    if (is_float($v)) {
        return ['float' => var_export($v, true)];
    }
    if (is_string($v)) {
        return preg_match('//u', $v) === 1 ? ['string' => $v] : ['bytes' => bin2hex($v)];
    }
    if (is_array($v)) {
        return array_map('val', $v);
    }
    return [get_debug_type($v) => var_export($v, true)];
}

function rows(array $rows): array
{
    return array_map(fn ($r) => array_map('val', array_values($r)), $rows);
}

function emit(string $check, array $outcome): void
{
    $line = json_encode(['check' => $check] + $outcome,
        JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE | JSON_PRESERVE_ZERO_FRACTION);
    fwrite(STDOUT, $line . "\n");
}

/// Runs every check in order, one contract line each.
function run_checks(array $checks): void
{
    foreach ($checks as $name => $fn) {
        try {
            emit($name, ['answer' => $fn()]);
        } catch (Skip $s) {
            emit($name, ['skip' => $s->getMessage()]);
        } catch (Throwable $e) {
            fwrite(STDERR, "$name: " . $e . "\n");
            emit($name, ['error' => get_class($e) . ': ' . $e->getMessage()]);
        }
    }
}

const TYPES_DDL = "CREATE TABLE %s_types (
  id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
  bi BIGINT, biu BIGINT UNSIGNED,
  de DECIMAL(65,30), f FLOAT, d DOUBLE,
  dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), y YEAR,
  c CHAR(10), vc VARCHAR(100), tx TEXT,
  bn BINARY(16), vb VARBINARY(256), bl BLOB,
  js JSON, en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(64)
) DEFAULT CHARSET utf8mb4";

function all_bytes(): string
{
    return implode('', array_map('chr', range(0, 255)));
}

function types_literal(string $p): string
{
    $hex = bin2hex(all_bytes());
    return "INSERT INTO {$p}_types VALUES
(1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
 '-99999999999999999999999999999999999.999999999999999999999999999999', -3.40282e38, -1.7976931348623157e308,
 '1000-01-01', '1000-01-01 00:00:00.000000', '2001-02-03 04:05:06.000007', '-838:59:59.000000', 1901,
 'chär', 'emoji 🐬 ok', 'text ✓ 🐬', X'000102030405060708090a0b0c0d0e0f', X'$hex', X'$hex',
 '{\"k\": [1, 2.5, \"v\", null]}', 'a', 'x,z', b'0'),
(2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
 '99999999999999999999999999999999999.999999999999999999999999999999', 3.40282e38, 1.7976931348623157e308,
 '9999-12-31', '9999-12-31 23:59:59.999999', '2024-02-29 23:59:59.999999', '838:59:59.000000', 2155,
 '', '🐬', '', X'ffffffffffffffffffffffffffffffff', X'', X'',
 '[]', 'c', 'x,y,z', b'1111111111111111111111111111111111111111111111111111111111111111'),
(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)";
}

/// The rows of types_literal as PHP values (the types a PHP application
/// binds: ints, floats, strings; 64-bit unsigned and DECIMAL as strings).
function types_params(): array
{
    $all = all_bytes();
    return [
        [1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, PHP_INT_MIN, 0,
         '-99999999999999999999999999999999999.999999999999999999999999999999',
         -3.40282e38, -1.7976931348623157e308,
         '1000-01-01', '1000-01-01 00:00:00', '2001-02-03 04:05:06.000007', '-838:59:59', 1901,
         'chär', 'emoji 🐬 ok', 'text ✓ 🐬', substr($all, 0, 16), $all, $all,
         '{"k": [1, 2.5, "v", null]}', 'a', 'x,z', str_repeat("\0", 8)],
        [2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, PHP_INT_MAX,
         '18446744073709551615',
         '99999999999999999999999999999999999.999999999999999999999999999999',
         3.40282e38, 1.7976931348623157e308,
         '9999-12-31', '9999-12-31 23:59:59.999999', '2024-02-29 23:59:59.999999', '838:59:59', 2155,
         '', '🐬', '', str_repeat("\xff", 16), '', '',
         '[]', 'c', 'x,y,z', str_repeat("\xff", 8)],
        array_merge([3], array_fill(0, 28, null)),
    ];
}

/// bind_param's type letters for types_params' columns: i, d, s, and b
/// (sent with COM_STMT_SEND_LONG_DATA) for the BLOB.
const TYPES_BIND = 'iiiiiiiiiissddssssisssssbssss';

function big_table_sql(string $p, int $n): array
{
    return [
        "DROP TABLE IF EXISTS {$p}_big",
        "CREATE TABLE {$p}_big (id INT PRIMARY KEY, v VARCHAR(1024))",
        "INSERT INTO {$p}_big SELECT seq, REPEAT(CHAR(65 + seq % 26), 1000) FROM seq_1_to_$n",
    ];
}

/// Row count and sha256 of the concatenated values (id then v).
function digest(iterable $rows): array
{
    $h = hash_init('sha256');
    $count = 0;
    foreach ($rows as [$id, $v]) {
        $count++;
        hash_update($h, (string) $id);
        hash_update($h, (string) $v);
    }
    return ['rows' => $count, 'sha256' => hash_final($h)];
}

const PROCEDURE = "CREATE PROCEDURE %s_two(IN x INT) BEGIN SELECT x AS a; SELECT x + 1 AS b, 'z' AS c; END";
const PROCEDURE_OUT = "CREATE PROCEDURE %s_out(IN a INT, OUT b INT, INOUT c VARCHAR(20)) "
    . "BEGIN SET b = a * 2; SET c = CONCAT(c, '!'); SELECT a AS inside; END";
