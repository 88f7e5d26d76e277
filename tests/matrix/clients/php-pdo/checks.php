<?php
// PHP's PDO_mysql (over mysqlnd) through the matrix checks (contract:
// tests/matrix/README.md), with PHP 8.2's defaults: PDO::ERRMODE_EXCEPTION,
// utf8mb4, PDO::MYSQL_ATTR_FOUND_ROWS off, multi-statements on, and
// emulated prepares (PDO::ATTR_EMULATE_PREPARES true: the driver quotes
// parameters into the statement text, by the connection's character set
// and the server's NO_BACKSLASH_ESCAPES status flag). `php-pdo-native`
// runs the same checks with emulation off (`native` argument):
// server-side prepared statements.

declare(strict_types=1);

require __DIR__ . '/../../php/common.php';

$native = ($argv[1] ?? '') === 'native';
define('P', $native ? 'php_pdo_native' : 'php_pdo');
define('EMULATE', !$native);

function connect(array $options = [], ?string $db = null, string $charset = 'utf8mb4'): PDO
{
    $dsn = sprintf('mysql:host=%s;port=%s;dbname=%s;charset=%s', env('MQ_HOST'), env('MQ_PORT'),
        $db ?? env('MQ_DATABASE'), $charset);
    return new PDO($dsn, env('MQ_USER'), env('MQ_PASSWORD'),
        $options + [PDO::ATTR_EMULATE_PREPARES => EMULATE]);
}

function meta(PDOStatement $s): array
{
    $out = [];
    for ($i = 0; $i < $s->columnCount(); $i++) {
        $out[] = $s->getColumnMeta($i);
    }
    return $out;
}

/// A statement's result or counts, as PDO shows them.
function answer(PDOStatement $s): array
{
    $out = ['columns' => $s->columnCount(), 'rowCount' => $s->rowCount()];
    if ($s->columnCount() > 0) {
        $out['meta'] = meta($s);
        $out['rows'] = rows($s->fetchAll(PDO::FETCH_NUM));
    }
    return $out;
}

/// Every result of a statement (nextRowset).
function all_sets(PDOStatement $s): array
{
    $sets = [answer($s)];
    while ($s->nextRowset()) {
        $sets[] = answer($s);
    }
    return $sets;
}

function q(PDO $pdo, string $sql, ?array $params = null): array
{
    if ($params === null) {
        return answer($pdo->query($sql));
    }
    $s = $pdo->prepare($sql);
    $s->execute($params);
    return answer($s);
}

function error(Throwable $e): array
{
    return $e instanceof PDOException
        ? ['code' => $e->getCode(), 'errorInfo' => $e->errorInfo, 'message' => $e->getMessage()]
        : ['class' => get_class($e), 'message' => $e->getMessage()];
}

function attempt(callable $fn): mixed
{
    try {
        return $fn();
    } catch (PDOException $e) {
        return error($e);
    }
}

function encrypted(PDO $pdo): bool
{
    return $pdo->query("SHOW SESSION STATUS LIKE 'Ssl_version'")->fetch(PDO::FETCH_NUM)[1] !== '';
}

/// Binds a value with the PDO type a PHP application gives it.
function bind(PDOStatement $s, int $at, mixed $v, bool $lob = false): void
{
    $type = match (true) {
        $v === null => PDO::PARAM_NULL,
        is_int($v) => PDO::PARAM_INT,
        is_bool($v) => PDO::PARAM_BOOL,
        $lob => PDO::PARAM_LOB,
        default => PDO::PARAM_STR,
    };
    $s->bindValue($at, is_float($v) ? var_export($v, true) : $v, $type);
}

const CHARSET_ATTACKS = [
    // A character of the set whose last byte is 0x5C, then a quote.
    'gbk' => ["\xe5\x81", "\x95\x5c"],
    'big5' => ["\xa4\x40", "\xa5\x5c"],
    'sjis' => ["\x88\x9f", "\x95\x5c"],
];

run_checks([
    'connect' => function () {
        $pdo = connect();
        $a = q($pdo, 'SELECT 1');
        $a += ['server_version' => $pdo->getAttribute(PDO::ATTR_SERVER_VERSION),
            'connection_status' => $pdo->getAttribute(PDO::ATTR_CONNECTION_STATUS),
            'autocommit' => $pdo->getAttribute(PDO::ATTR_AUTOCOMMIT),
            'emulate' => $pdo->getAttribute(PDO::ATTR_EMULATE_PREPARES),
            'encrypted' => encrypted($pdo)];
        return $a;
    },
    'tls' => function () {
        if (env('MQ_TLS') !== '1') {
            throw new Skip('MQ_TLS=0');
        }
        $pdo = connect([PDO::MYSQL_ATTR_SSL_CA => env('MQ_TLS_CA'),
            PDO::MYSQL_ATTR_SSL_VERIFY_SERVER_CERT => true]);
        return ['encrypted' => encrypted($pdo), 'result' => q($pdo, "SELECT 'over tls' AS t")];
    },
    'types_text' => function () {
        $pdo = connect();
        $pdo->exec('DROP TABLE IF EXISTS ' . P . '_types');
        $pdo->exec(sprintf(TYPES_DDL, P));
        $written = $pdo->exec(types_literal(P));
        // PDO::ATTR_STRINGIFY_FETCHES: every value as a string.
        $strings = connect([PDO::ATTR_STRINGIFY_FETCHES => true]);
        return ['written' => $written, 'read' => q($pdo, 'SELECT * FROM ' . P . '_types ORDER BY id'),
            'stringified' => q($strings, 'SELECT * FROM ' . P . '_types ORDER BY id')];
    },
    'types_prepared' => function () {
        $pdo = connect();
        $pdo->exec('DROP TABLE IF EXISTS ' . P . '_types');
        $pdo->exec(sprintf(TYPES_DDL, P));
        $s = $pdo->prepare('INSERT INTO ' . P . '_types VALUES (' . implode(', ', array_fill(0, 29, '?')) . ')');
        $written = [];
        foreach (types_params() as $row) {
            foreach ($row as $i => $v) {
                bind($s, $i + 1, $v, $i === 24);
            }
            $s->execute();
            $written[] = $s->rowCount();
        }
        // execute() with an array: every value bound as a string.
        $arrays = q($pdo, 'SELECT ?, ? + 1, CONCAT(?, ?) AS c', ['a', 41, "\0\xfe", 'é']);
        $read = q($pdo, 'SELECT * FROM ' . P . '_types WHERE id >= ? ORDER BY id', [1]);
        return ['written' => $written, 'read' => $read, 'execute_array' => $arrays];
    },
    'transactions' => function () {
        $t = P . '_tx';
        $pdo = connect();
        $other = connect();
        $count = fn () => (int) $other->query("SELECT COUNT(*) FROM $t")->fetchColumn();
        $pdo->exec("DROP TABLE IF EXISTS $t");
        $pdo->exec("CREATE TABLE $t (id INT PRIMARY KEY)");
        $pdo->beginTransaction();
        $in = $pdo->inTransaction();
        $s = $pdo->prepare("INSERT INTO $t VALUES (?)");
        $s->execute([1]);
        $unseen = $count();
        $pdo->commit();
        $committed = $count();
        $pdo->beginTransaction();
        $pdo->exec("INSERT INTO $t VALUES (2)");
        $pdo->rollBack();
        $rolled_back = $count();
        $pdo->setAttribute(PDO::ATTR_AUTOCOMMIT, false);
        $pdo->exec("INSERT INTO $t VALUES (3)");
        $before = $count();
        $pdo->exec('COMMIT');
        $after = $count();
        // A commit without a transaction: PDO's own error.
        $pdo->setAttribute(PDO::ATTR_AUTOCOMMIT, true);
        $nothing = attempt(fn () => $pdo->commit());
        return ['in_transaction' => $in, 'uncommitted_seen_by_other' => $unseen,
            'after_commit' => $committed, 'after_rollback' => $rolled_back,
            'autocommit_off_before_commit' => $before, 'autocommit_off_after_commit' => $after,
            'commit_without_transaction' => $nothing];
    },
    'errors' => function () {
        $t = P . '_err';
        $pdo = connect();
        $pdo->exec("DROP TABLE IF EXISTS $t");
        $pdo->exec("CREATE TABLE $t (id INT PRIMARY KEY)");
        $pdo->exec("INSERT INTO $t VALUES (1)");
        $out = [];
        foreach (["INSERT INTO $t VALUES (1)", 'SELEC 1', 'SELECT * FROM ' . P . '_no_such_table',
            "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'custom', MYSQL_ERRNO = 1644"] as $sql) {
            $out[] = attempt(fn () => $pdo->exec($sql));
        }
        $out[] = attempt(fn () => q($pdo, 'SELEC ?', [1]));
        $out[] = attempt(fn () => q($pdo, "INSERT INTO $t VALUES (?)", [1]));
        // ERRMODE_SILENT: the error is in errorInfo.
        $silent = connect([PDO::ATTR_ERRMODE => PDO::ERRMODE_SILENT]);
        $silent->exec('SELEC 2');
        $q = $pdo->query("SELECT CAST('x' AS SIGNED)");
        $q->fetchAll();
        $warnings = $pdo->query('SHOW WARNINGS')->fetchAll(PDO::FETCH_NUM);
        return ['errors' => $out, 'silent' => $silent->errorInfo(), 'warnings' => $warnings,
            'still_works' => $pdo->query('SELECT 2')->fetchColumn()];
    },
    'procedure' => function () {
        $pdo = connect();
        $pdo->exec('DROP PROCEDURE IF EXISTS ' . P . '_two');
        $pdo->exec(sprintf(PROCEDURE, P));
        $pdo->exec('DROP PROCEDURE IF EXISTS ' . P . '_out');
        $pdo->exec(sprintf(PROCEDURE_OUT, P));
        $text = all_sets($pdo->query('CALL ' . P . '_two(41)'));
        $s = $pdo->prepare('CALL ' . P . '_two(?)');
        $s->execute([7]);
        $prepared = all_sets($s);
        // OUT parameters through session variables (PDO_mysql binds no
        // OUT parameters).
        $pdo->exec("SET @c = 'hi'");
        $s = $pdo->prepare('CALL ' . P . '_out(?, @b, @c)');
        $s->bindValue(1, 21, PDO::PARAM_INT);
        $s->execute();
        $out_sets = all_sets($s);
        $vars = rows($pdo->query('SELECT @b, @c')->fetchAll(PDO::FETCH_NUM));
        return ['text' => $text, 'prepared' => $prepared, 'out_sets' => $out_sets, 'out_vars' => $vars];
    },
    'multi_statement' => function () {
        $t = P . '_multi';
        $pdo = connect();
        $pdo->exec("DROP TABLE IF EXISTS $t");
        $pdo->exec("CREATE TABLE $t (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)");
        $ok = attempt(fn () => all_sets($pdo->query(
            "SELECT 1 AS one; INSERT INTO $t (v) VALUES ('x'), ('y'); SELECT * FROM $t ORDER BY id")));
        $sets = [];
        $failing = attempt(function () use ($pdo, &$sets) {
            $s = $pdo->query('SELECT 1; SELECT * FROM ' . P . '_missing; SELECT 3');
            $sets[] = answer($s);
            while ($s->nextRowset()) {
                $sets[] = answer($s);
            }
            return null;
        });
        $after = $pdo->query('SELECT 2')->fetchColumn();
        // PDO::MYSQL_ATTR_MULTI_STATEMENTS false: the server refuses a second one.
        $plain = connect([PDO::MYSQL_ATTR_MULTI_STATEMENTS => false]);
        $refused = [];
        foreach (['SELECT 1; SELECT 2', "INSERT INTO $t (v) VALUES ('z'); DROP TABLE $t"] as $sql) {
            $refused[] = attempt(fn () => all_sets($plain->query($sql)));
        }
        return ['results' => $ok, 'midway_sets' => $sets, 'error_midway' => $failing,
            'after' => $after, 'without_option' => $refused,
            'rows_after' => $pdo->query("SELECT COUNT(*) FROM $t")->fetchColumn()];
    },
    'large_result' => function () {
        $pdo = connect();
        foreach (big_table_sql(P, (int) env('MQ_BIG_ROWS')) as $sql) {
            $pdo->exec($sql);
        }
        // Unbuffered, as large results are read.
        $pdo->setAttribute(PDO::MYSQL_ATTR_USE_BUFFERED_QUERY, false);
        $s = $pdo->prepare('SELECT id, v FROM ' . P . '_big WHERE id > ? ORDER BY id');
        $s->execute([0]);
        $gen = (function () use ($s) {
            while ($row = $s->fetch(PDO::FETCH_NUM)) {
                yield $row;
            }
        })();
        $a = digest($gen);
        $s->closeCursor();
        $pdo->exec('DROP TABLE ' . P . '_big');
        return $a;
    },
    'last_insert_id' => function () {
        $t = P . '_ai';
        $pdo = connect();
        $pdo->exec("DROP TABLE IF EXISTS $t");
        $pdo->exec("CREATE TABLE $t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 1000");
        $pdo->exec("INSERT INTO $t (v) VALUES (1), (2)");
        $text = $pdo->lastInsertId();
        $s = $pdo->prepare("INSERT INTO $t (v) VALUES (?)");
        $s->execute([3]);
        return ['text' => $text, 'prepared' => $pdo->lastInsertId(),
            'sql' => $pdo->query('SELECT LAST_INSERT_ID()')->fetchColumn()];
    },
    'switch_database' => function () {
        $pdo = connect();
        $db = fn () => $pdo->query('SELECT DATABASE()')->fetchColumn();
        $start = $db();
        $pdo->exec('USE `' . env('MQ_OTHER_DATABASE') . '`');
        $switched = $db();
        $unknown = attempt(fn () => $pdo->exec('USE no_such_database'));
        return ['start' => $start, 'switched' => $switched, 'unknown' => $unknown,
            'after_unknown' => $db(),
            'connect_unknown' => attempt(fn () => connect([], 'no_such_database') && null)];
    },
    'pool_reset_ping' => function () {
        // PDO::ATTR_PERSISTENT: a connection handed back and taken again
        // by the next `new PDO` with the same DSN, checked with COM_PING.
        $opts = [PDO::ATTR_PERSISTENT => true];
        $pdo = connect($opts);
        $pdo->exec('SET @matrix = 42');
        $pdo->exec('USE `' . env('MQ_OTHER_DATABASE') . '`');
        $pdo = null;
        $again = connect($opts);
        return ['after_reuse' => rows($again->query('SELECT @matrix, DATABASE()')->fetchAll(PDO::FETCH_NUM))];
    },
    'cursor' => function () {
        throw new Skip('PDO_mysql has no server-side cursors (PDO::ATTR_CURSOR is not supported)');
    },
    'charset_injection' => function () {
        // Emulated prepares quote by the connection's character set: a
        // proxy that alters the bytes, or scans them as another set, turns
        // the value into code.
        $t = P . '_owners';
        $pdo = connect();
        $pdo->exec("DROP TABLE IF EXISTS $t");
        $pdo->exec("CREATE TABLE $t (owner VARCHAR(64), secret VARCHAR(64)) CHARSET utf8mb4");
        $pdo->exec("INSERT INTO $t VALUES ('alice', 's1'), ('bob', 's2')");
        $answers = [];
        foreach (CHARSET_ATTACKS as $charset => $leads) {
            $c = connect([], null, $charset);
            foreach ($leads as $k => $lead) {
                foreach (["' OR 1=1 -- ", "'; SELECT 'second' -- "] as $tail) {
                    $answers["$charset/$k/" . substr($tail, 0, 3)] = attempt(
                        fn () => q($c, "SELECT owner, secret FROM $t WHERE owner = ?", [$lead . $tail]));
                }
            }
            $answers["$charset/quote"] = bin2hex($c->quote($leads[1] . "'"));
            $answers["$charset/echo"] = q($c, 'SELECT ? AS v, HEX(?) AS h', [$leads[1], $leads[1]]);
        }
        return $answers;
    },
    'no_backslash_escapes' => function () {
        // mysqlnd quotes by the status flag SERVER_STATUS_NO_BACKSLASH_ESCAPES.
        $t = P . '_nbe';
        $pdo = connect();
        $pdo->exec("DROP TABLE IF EXISTS $t");
        $pdo->exec("CREATE TABLE $t (owner VARCHAR(64))");
        $pdo->exec("INSERT INTO $t VALUES ('alice'), ('bob')");
        $pdo->exec("SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'");
        $answers = ['quoted_after_set' => $pdo->quote("a'b\\")];
        foreach (["\\' OR 1=1 -- ", 'x\\', "it's"] as $value) {
            $answers[$value] = attempt(fn () => q($pdo, "SELECT owner FROM $t WHERE owner = ?", [$value]));
        }
        $pdo->exec('SET SESSION sql_mode = DEFAULT');
        $answers['quoted_after_default'] = $pdo->quote("a'b\\");
        return $answers;
    },
    'bytes_in_sql_text' => function () {
        // Binary values bound as PDO::PARAM_LOB and PDO::PARAM_STR (with
        // emulation: quoted into the utf8mb4 statement text).
        $t = P . '_bin';
        $pdo = connect();
        $pdo->exec("DROP TABLE IF EXISTS $t");
        $pdo->exec("CREATE TABLE $t (id INT PRIMARY KEY, b LONGBLOB, vb VARBINARY(300))");
        $s = $pdo->prepare("INSERT INTO $t VALUES (?, ?, ?)");
        foreach ([[1, "\x00F\xfe"], [2, all_bytes()]] as [$id, $v]) {
            $s->bindValue(1, $id, PDO::PARAM_INT);
            $s->bindValue(2, $v, PDO::PARAM_LOB);
            $s->bindValue(3, $v, PDO::PARAM_STR);
            $s->execute();
        }
        $warnings = $pdo->query('SHOW WARNINGS')->fetchAll(PDO::FETCH_NUM);
        return ['warnings' => $warnings,
            'rows' => q($pdo, "SELECT id, LENGTH(b), HEX(b), b, HEX(vb), vb FROM $t ORDER BY id")];
    },
    'large_packets' => function () {
        // Values of 16 MiB and more (several MySQL packets) both ways:
        // quoted into the statement text (emulated), or sent as a bound
        // LOB (native), and read back.
        $t = P . '_bigval';
        $pdo = connect();
        $pdo->exec("DROP TABLE IF EXISTS $t");
        $pdo->exec("CREATE TABLE $t (id INT PRIMARY KEY, v LONGBLOB)");
        $out = [];
        foreach ([(1 << 24) - 1, (1 << 24) + 1] as $i => $size) {
            $value = substr(str_repeat(substr(all_bytes(), $i) . substr(all_bytes(), 0, $i),
                intdiv($size, 256) + 1), 0, $size);
            $s = $pdo->prepare("INSERT INTO $t VALUES (?, ?)");
            $s->bindValue(1, $i, PDO::PARAM_INT);
            $s->bindValue(2, $value, PDO::PARAM_LOB);
            $s->execute();
            $r = $pdo->prepare("SELECT v, LENGTH(v) FROM $t WHERE id = ?");
            $r->execute([$i]);
            [$got, $length] = $r->fetch(PDO::FETCH_NUM);
            $out[(string) $size] = ['length' => $length, 'same_bytes' => $got === $value];
        }
        $pdo->exec("DROP TABLE $t");
        return $out;
    },
    'found_rows' => function () {
        // PDO::MYSQL_ATTR_FOUND_ROWS (off by default) sets CLIENT_FOUND_ROWS.
        $t = P . '_found';
        $answers = [];
        foreach (['default' => [], 'found_rows' => [PDO::MYSQL_ATTR_FOUND_ROWS => true]] as $name => $opts) {
            $pdo = connect($opts);
            $pdo->exec("DROP TABLE IF EXISTS $t");
            $pdo->exec("CREATE TABLE $t (id INT PRIMARY KEY, v INT)");
            $pdo->exec("INSERT INTO $t VALUES (1, 0), (2, 1), (3, 1)");
            $update = $pdo->exec("UPDATE $t SET v = 1");
            $s = $pdo->prepare("UPDATE $t SET v = ? WHERE id <= ?");
            $s->execute([1, 2]);
            $answers[$name] = ['update' => $update, 'prepared_update' => $s->rowCount(),
                'upsert_same' => $pdo->exec("INSERT INTO $t VALUES (1, 1) ON DUPLICATE KEY UPDATE v = 1"),
                'upsert_changed' => $pdo->exec("INSERT INTO $t VALUES (1, 1) ON DUPLICATE KEY UPDATE v = 2")];
        }
        return $answers;
    },
]);
