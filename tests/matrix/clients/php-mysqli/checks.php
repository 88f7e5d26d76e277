<?php
// PHP's mysqli (over mysqlnd, PHP's own implementation of the protocol)
// through the matrix checks (contract: tests/matrix/README.md), with PHP
// 8.2's defaults: mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT),
// so errors are mysqli_sql_exception; utf8mb4; server-side prepared
// statements with mysqli::prepare/bind_param; multi_query.

declare(strict_types=1);

require __DIR__ . '/../../php/common.php';

const P = 'php_mysqli';

function connect(?string $db = null, int $flags = 0, ?callable $before = null): mysqli
{
    $m = mysqli_init();
    if ($before) {
        $before($m);
    }
    $m->real_connect(env('MQ_HOST'), env('MQ_USER'), env('MQ_PASSWORD'), $db ?? env('MQ_DATABASE'),
        (int) env('MQ_PORT'), null, $flags);
    $m->set_charset('utf8mb4');
    return $m;
}

function fields(mysqli_result $r): array
{
    return array_map(fn ($f) => [$f->name, $f->orgname, $f->table, $f->orgtable, $f->db,
        $f->length, $f->charsetnr, $f->flags, $f->type, $f->decimals], $r->fetch_fields());
}

/// A text-protocol result or OK, as mysqli shows it.
function answer(mysqli $m, mysqli_result|bool $r): array
{
    $out = ['affected_rows' => $m->affected_rows, 'insert_id' => $m->insert_id,
        'warnings' => $m->warning_count, 'info' => $m->info, 'field_count' => $m->field_count];
    if ($r instanceof mysqli_result) {
        $out['fields'] = fields($r);
        $out['rows'] = rows($r->fetch_all(MYSQLI_NUM));
        $r->free();
    }
    return $out;
}

function q(mysqli $m, string $sql): array
{
    return answer($m, $m->query($sql));
}

function error(Throwable $e): array
{
    return $e instanceof mysqli_sql_exception
        ? ['errno' => $e->getCode(), 'sqlstate' => $e->getSqlState(), 'message' => $e->getMessage()]
        : ['class' => get_class($e), 'message' => $e->getMessage()];
}

/// A prepared statement's answer: its result (binary protocol, typed
/// values) or counts.
function stmt_answer(mysqli_stmt $s): array
{
    $out = ['affected_rows' => $s->affected_rows, 'insert_id' => $s->insert_id,
        'sqlstate' => $s->sqlstate, 'field_count' => $s->field_count,
        'param_count' => $s->param_count];
    $r = $s->get_result();
    if ($r instanceof mysqli_result) {
        $out['fields'] = fields($r);
        $out['rows'] = rows($r->fetch_all(MYSQLI_NUM));
    }
    return $out;
}

function encrypted(mysqli $m): bool
{
    $row = $m->query("SHOW SESSION STATUS LIKE 'Ssl_version'")->fetch_row();
    return $row[1] !== '';
}

run_checks([
    'connect' => function () {
        // The first connection: caching_sha2_password full authentication
        // on a fresh sidecar (mysqlnd asks for the server's RSA key).
        $m = connect();
        $a = q($m, 'SELECT 1');
        $a += ['server_info' => $m->server_info, 'server_version' => $m->server_version,
            'protocol_version' => $m->protocol_version, 'charset' => $m->character_set_name(),
            'sqlstate' => $m->sqlstate, 'encrypted' => encrypted($m)];
        $m->close();
        return $a;
    },
    'tls' => function () {
        if (env('MQ_TLS') !== '1') {
            throw new Skip('MQ_TLS=0');
        }
        $m = connect(null, MYSQLI_CLIENT_SSL, function (mysqli $m) {
            $m->ssl_set(null, null, env('MQ_TLS_CA'), null, null);
            $m->options(MYSQLI_OPT_SSL_VERIFY_SERVER_CERT, true);
        });
        $a = ['encrypted' => encrypted($m), 'result' => q($m, "SELECT 'over tls' AS t")];
        $m->close();
        return $a;
    },
    'types_text' => function () {
        $m = connect();
        $m->query('DROP TABLE IF EXISTS ' . P . '_types');
        $m->query(sprintf(TYPES_DDL, P));
        $written = q($m, types_literal(P));
        $read = q($m, 'SELECT * FROM ' . P . '_types ORDER BY id');
        // MYSQLI_OPT_INT_AND_FLOAT_NATIVE: numbers as PHP ints and floats.
        $native = connect(null, 0, fn ($c) => $c->options(MYSQLI_OPT_INT_AND_FLOAT_NATIVE, true));
        $typed = q($native, 'SELECT * FROM ' . P . '_types ORDER BY id');
        return ['written' => $written, 'read' => $read, 'native' => $typed];
    },
    'types_prepared' => function () {
        $m = connect();
        $m->query('DROP TABLE IF EXISTS ' . P . '_types');
        $m->query(sprintf(TYPES_DDL, P));
        $s = $m->prepare('INSERT INTO ' . P . '_types VALUES (' . implode(', ', array_fill(0, 29, '?')) . ')');
        $written = [];
        foreach (types_params() as $row) {
            $s->bind_param(TYPES_BIND, ...$row);
            if ($row[24] !== null) {
                $s->send_long_data(24, $row[24]);
            }
            $s->execute();
            $written[] = ['affected_rows' => $s->affected_rows, 'insert_id' => $s->insert_id];
        }
        $s->close();
        $r = $m->prepare('SELECT * FROM ' . P . '_types WHERE id >= ? ORDER BY id');
        $one = 1;
        $r->bind_param('i', $one);
        $r->execute();
        $read = stmt_answer($r);
        // execute_query (PHP 8.2): every parameter bound as a string.
        $eq = $m->execute_query('SELECT ?, ? + 1, CONCAT(?, ?) AS c', ['a', 41, "\0\xfe", 'é']);
        return ['written' => $written, 'read' => $read,
            'execute_query' => ['fields' => fields($eq), 'rows' => rows($eq->fetch_all(MYSQLI_NUM))]];
    },
    'transactions' => function () {
        $t = P . '_tx';
        $m = connect();
        $other = connect();
        $count = fn () => (int) $other->query("SELECT COUNT(*) FROM $t")->fetch_row()[0];
        $m->query("DROP TABLE IF EXISTS $t");
        $m->query("CREATE TABLE $t (id INT PRIMARY KEY)");
        $m->begin_transaction();
        $m->query("INSERT INTO $t VALUES (1)");
        $unseen = $count();
        $m->commit();
        $committed = $count();
        $m->begin_transaction(MYSQLI_TRANS_START_READ_ONLY);
        try {
            $m->query("INSERT INTO $t VALUES (9)");
            $ro = null;
        } catch (mysqli_sql_exception $e) {
            $ro = error($e);
        }
        $m->rollback();
        $m->begin_transaction();
        $m->query("INSERT INTO $t VALUES (2)");
        $m->rollback();
        $rolled_back = $count();
        $m->autocommit(false);
        $m->query("INSERT INTO $t VALUES (3)");
        $before = $count();
        $m->commit();
        $after = $count();
        $m->autocommit(true);
        return ['uncommitted_seen_by_other' => $unseen, 'after_commit' => $committed,
            'read_only' => $ro, 'after_rollback' => $rolled_back,
            'autocommit_off_before_commit' => $before, 'autocommit_off_after_commit' => $after];
    },
    'errors' => function () {
        $t = P . '_err';
        $m = connect();
        $m->query("DROP TABLE IF EXISTS $t");
        $m->query("CREATE TABLE $t (id INT PRIMARY KEY)");
        $m->query("INSERT INTO $t VALUES (1)");
        $out = [];
        foreach (["INSERT INTO $t VALUES (1)", 'SELEC 1', 'SELECT * FROM ' . P . '_no_such_table',
            "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'custom', MYSQL_ERRNO = 1644"] as $sql) {
            try {
                $m->query($sql);
                $out[] = null;
            } catch (mysqli_sql_exception $e) {
                $out[] = error($e);
            }
        }
        // Errors at prepare and at execute.
        foreach (['SELEC ?', "INSERT INTO $t VALUES (?)"] as $sql) {
            try {
                $s = $m->prepare($sql);
                $one = 1;
                $s->bind_param('i', $one);
                $s->execute();
                $out[] = null;
            } catch (mysqli_sql_exception $e) {
                $out[] = error($e);
            }
        }
        $m->query("SELECT CAST('x' AS SIGNED)")->free();
        $warnings = [];
        $w = $m->get_warnings();
        while ($w) {
            $warnings[] = [$w->errno, $w->sqlstate, $w->message];
            $w = $w->next() ? $w : false;
        }
        return ['errors' => $out, 'warnings' => $warnings,
            'still_works' => $m->query('SELECT 2')->fetch_row()[0]];
    },
    'procedure' => function () {
        $m = connect();
        $m->query('DROP PROCEDURE IF EXISTS ' . P . '_two');
        $m->query(sprintf(PROCEDURE, P));
        $m->query('DROP PROCEDURE IF EXISTS ' . P . '_out');
        $m->query(sprintf(PROCEDURE_OUT, P));
        // Text: every result with multi_query's loop.
        $m->multi_query('CALL ' . P . '_two(41)');
        $text = [];
        do {
            $text[] = answer($m, $m->store_result());
        } while ($m->more_results() && $m->next_result());
        // Prepared: every result of the statement, then OUT parameters
        // through session variables (as PHP's manual shows them).
        $s = $m->prepare('CALL ' . P . '_two(?)');
        $x = 7;
        $s->bind_param('i', $x);
        $s->execute();
        $prepared = [];
        do {
            $prepared[] = stmt_answer($s);
        } while ($s->more_results() && $s->next_result());
        $s->close();
        $s = $m->prepare('CALL ' . P . '_out(?, @b, @c)');
        $m->query("SET @c = 'hi'");
        $a = 21;
        $s->bind_param('i', $a);
        $s->execute();
        $out_sets = [];
        do {
            $out_sets[] = stmt_answer($s);
        } while ($s->more_results() && $s->next_result());
        $s->close();
        $vars = rows($m->query('SELECT @b, @c')->fetch_all(MYSQLI_NUM));
        // OUT parameters as placeholders: the server answers them as a
        // result flagged SERVER_PS_OUT_PARAMS.
        $s = $m->prepare('CALL ' . P . '_out(?, ?, ?)');
        $a = 5;
        $b = null;
        $c = 'yo';
        $s->bind_param('iis', $a, $b, $c);
        $s->execute();
        $placeholders = [];
        do {
            $placeholders[] = stmt_answer($s);
        } while ($s->more_results() && $s->next_result());
        return ['text' => $text, 'prepared' => $prepared, 'out_sets' => $out_sets,
            'out_vars' => $vars, 'out_placeholders' => $placeholders];
    },
    'multi_statement' => function () {
        $t = P . '_multi';
        $m = connect();
        $m->query("DROP TABLE IF EXISTS $t");
        $m->query("CREATE TABLE $t (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)");
        $m->multi_query("SELECT 1 AS one; INSERT INTO $t (v) VALUES ('x'), ('y'); SELECT * FROM $t ORDER BY id");
        $ok = [];
        do {
            $ok[] = answer($m, $m->store_result());
        } while ($m->more_results() && $m->next_result());
        $failing = [];
        try {
            $m->multi_query('SELECT 1; SELECT * FROM ' . P . '_missing; SELECT 3');
            do {
                $failing[] = answer($m, $m->store_result());
            } while ($m->more_results() && $m->next_result());
        } catch (mysqli_sql_exception $e) {
            $failing[] = error($e);
        }
        $after = rows($m->query('SELECT 2')->fetch_all(MYSQLI_NUM));
        // query() is one statement: the server refuses a second one.
        $refused = [];
        foreach (['SELECT 1; SELECT 2', "INSERT INTO $t (v) VALUES ('z'); DROP TABLE $t"] as $sql) {
            try {
                $refused[] = q($m, $sql);
            } catch (mysqli_sql_exception $e) {
                $refused[] = error($e);
            }
        }
        return ['results' => $ok, 'error_midway' => $failing, 'after' => $after,
            'query_refuses' => $refused,
            'rows_after' => $m->query("SELECT COUNT(*) FROM $t")->fetch_row()[0]];
    },
    'large_result' => function () {
        $m = connect();
        foreach (big_table_sql(P, (int) env('MQ_BIG_ROWS')) as $sql) {
            $m->query($sql);
        }
        // Unbuffered (MYSQLI_USE_RESULT), as large results are read.
        $r = $m->query('SELECT id, v FROM ' . P . '_big ORDER BY id', MYSQLI_USE_RESULT);
        $gen = (function () use ($r) {
            while ($row = $r->fetch_row()) {
                yield $row;
            }
        })();
        $a = digest($gen);
        $r->free();
        $m->query('DROP TABLE ' . P . '_big');
        return $a;
    },
    'last_insert_id' => function () {
        $t = P . '_ai';
        $m = connect();
        $m->query("DROP TABLE IF EXISTS $t");
        $m->query("CREATE TABLE $t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 1000");
        $m->query("INSERT INTO $t (v) VALUES (1), (2)");
        $text = $m->insert_id;
        $s = $m->prepare("INSERT INTO $t (v) VALUES (?)");
        $v = 3;
        $s->bind_param('i', $v);
        $s->execute();
        return ['text' => $text, 'prepared' => $s->insert_id, 'connection' => $m->insert_id,
            'sql' => $m->query('SELECT LAST_INSERT_ID()')->fetch_row()[0]];
    },
    'switch_database' => function () {
        $m = connect();
        $db = fn () => $m->query('SELECT DATABASE()')->fetch_row()[0];
        $start = $db();
        $m->select_db(env('MQ_OTHER_DATABASE'));  // COM_INIT_DB
        $switched = $db();
        $m->query('USE `' . env('MQ_DATABASE') . '`');
        $back = $db();
        try {
            $m->select_db('no_such_database');
            $unknown = null;
        } catch (mysqli_sql_exception $e) {
            $unknown = error($e);
        }
        return ['start' => $start, 'switched' => $switched, 'back' => $back,
            'unknown' => $unknown, 'after_unknown' => $db()];
    },
    'pool_reset_ping' => function () {
        // ping (COM_PING) keeps the session; change_user (COM_CHANGE_USER)
        // resets it; a persistent connection ("p:") handed back and taken
        // again is reset by mysqlnd.
        $m = connect();
        $m->query('SET @matrix = 42');
        $ping = $m->ping();
        $after_ping = $m->query('SELECT @matrix')->fetch_row()[0];
        $m->change_user(env('MQ_USER'), env('MQ_PASSWORD'), env('MQ_OTHER_DATABASE'));
        $after_change = rows($m->query('SELECT @matrix, DATABASE()')->fetch_all(MYSQLI_NUM));
        $p = new mysqli('p:' . env('MQ_HOST'), env('MQ_USER'), env('MQ_PASSWORD'), env('MQ_DATABASE'),
            (int) env('MQ_PORT'));
        $p->query('SET @matrix = 7');
        $p->query('USE `' . env('MQ_OTHER_DATABASE') . '`');
        $p->close();
        $p = new mysqli('p:' . env('MQ_HOST'), env('MQ_USER'), env('MQ_PASSWORD'), env('MQ_DATABASE'),
            (int) env('MQ_PORT'));
        $after_reuse = rows($p->query('SELECT @matrix, DATABASE()')->fetch_all(MYSQLI_NUM));
        return ['ping' => $ping, 'variable_after_ping' => $after_ping,
            'after_change_user' => $after_change, 'persistent_reused' => $after_reuse];
    },
    'refresh' => function () {
        // mysqli::refresh (COM_REFRESH): the server checks the RELOAD
        // privilege, which the account lacks (1227), after an implicit
        // commit. (mysqli::stat and dump_debug_info: see README's Known
        // limits.)
        $t = P . '_refresh';
        $m = connect();
        $other = connect();
        $m->query("DROP TABLE IF EXISTS $t");
        $m->query("CREATE TABLE $t (id INT PRIMARY KEY)");
        $out = [];
        foreach ([MYSQLI_REFRESH_TABLES, MYSQLI_REFRESH_HOSTS | MYSQLI_REFRESH_STATUS,
            MYSQLI_REFRESH_GRANT | MYSQLI_REFRESH_LOG | MYSQLI_REFRESH_THREADS] as $flags) {
            $m->begin_transaction();
            $m->query("INSERT INTO $t VALUES ($flags)");
            $ok = $m->refresh($flags);
            $out[] = ['flags' => $flags, 'result' => $ok, 'errno' => $m->errno, 'error' => $m->error,
                'sqlstate' => $m->sqlstate,
                'committed' => (int) $other->query("SELECT COUNT(*) FROM $t")->fetch_row()[0]];
            $m->rollback();
        }
        return $out;
    },
    'kill' => function () {
        // mysqli::kill (COM_PROCESS_KILL) and KILL statements, of another
        // connection and of the connection's own id (thread ids differ,
        // and are left out).
        mysqli_report(MYSQLI_REPORT_OFF);
        try {
            $state = fn (mysqli $m, mixed $r) => ['result' => $r instanceof mysqli_result
                ? rows($r->fetch_all(MYSQLI_NUM)) : $r, 'errno' => $m->errno, 'error' => $m->error,
                'sqlstate' => $m->sqlstate];
            $a = connect();
            $b = connect();
            $out = ['kill_other' => $state($a, $a->kill($b->thread_id))];
            $out['killed_query'] = $state($b, $b->query('SELECT 1'));
            $out['killed_ping'] = $state($b, $b->ping());
            $out['kill_unknown'] = $state($a, $a->kill(999999));
            $out['kill_query_self'] = $state($a, $a->query('KILL QUERY ' . $a->thread_id));
            $out['after_kill_query_self'] = $state($a, $a->query('SELECT 2'));
            $out['kill_self'] = $state($a, $a->query('KILL ' . $a->thread_id));
            $out['after_kill_self'] = $state($a, $a->query('SELECT 3'));
            $c = connect();
            $out['com_kill_self'] = $state($c, $c->kill($c->thread_id));
            $out['after_com_kill_self'] = $state($c, $c->query('SELECT 4'));
            return $out;
        } finally {
            mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
        }
    },
    'login_errors' => function () {
        // Refused logins (wrong password, unknown user, unknown database,
        // no password) and a refused change_user, as mysqli reports them.
        $out = [];
        foreach ([[env('MQ_USER'), 'wrong', env('MQ_DATABASE')], [P . '_nobody', 'x', env('MQ_DATABASE')],
            [env('MQ_USER'), env('MQ_PASSWORD'), P . '_no_such_database'],
            [env('MQ_USER'), '', env('MQ_DATABASE')]] as [$user, $password, $db]) {
            try {
                $m = mysqli_init();
                $m->real_connect(env('MQ_HOST'), $user, $password, $db, (int) env('MQ_PORT'));
                $out[] = null;
            } catch (mysqli_sql_exception $e) {
                $out[] = error($e);
            }
        }
        $m = connect();
        try {
            $m->change_user(env('MQ_USER'), 'wrong', env('MQ_DATABASE'));
            $out[] = null;
        } catch (mysqli_sql_exception $e) {
            // Without the SQLSTATE: the server's ERR says 28000 both ways,
            // but mysqlnd reports HY000 after a caching_sha2_password
            // exchange (the matrix's sidecar asks for that plugin; MariaDB
            // switches to mysql_native_password).
            $out[] = array_diff_key(error($e), ['sqlstate' => true]);
        }
        return $out;
    },
    'cursor' => function () {
        // A read-only server-side cursor (COM_STMT_FETCH, one row a time:
        // mysqlnd implements no other PREFETCH_ROWS), read with
        // bind_result/fetch.
        $t = P . '_cur';
        $m = connect();
        $m->query("DROP TABLE IF EXISTS $t");
        $m->query("CREATE TABLE $t (id INT PRIMARY KEY, v VARCHAR(20))");
        $m->query("INSERT INTO $t SELECT seq, CONCAT('row ', seq) FROM seq_1_to_25");
        $s = $m->stmt_init();
        $s->prepare("SELECT id, v FROM $t WHERE id > ? ORDER BY id");
        $s->attr_set(MYSQLI_STMT_ATTR_CURSOR_TYPE, MYSQLI_CURSOR_TYPE_READ_ONLY);
        $from = 3;
        $s->bind_param('i', $from);
        $s->execute();
        $s->bind_result($id, $v);
        $got = [];
        while ($s->fetch()) {
            $got[] = [val($id), val($v)];
        }
        // Another statement while a second cursor is open.
        $s->execute();
        $s->fetch();
        $first = [val($id), val($v)];
        $other = $m->query('SELECT 5')->fetch_row()[0];
        $rest = 0;
        while ($s->fetch()) {
            $rest++;
        }
        // reset (COM_STMT_RESET) closes the cursor; executed again, it
        // starts over.
        $s->execute();
        $s->fetch();
        $s->reset();
        $s->execute();
        $s->fetch();
        $after_reset = [val($id), val($v)];
        return ['rows' => $got, 'reopened_first' => $first, 'other' => $other, 'rest' => $rest,
            'after_reset' => $after_reset];
    },
]);
