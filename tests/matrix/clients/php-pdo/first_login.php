<?php
// PDO_mysql's first logins with PHP's default options (contract:
// tests/matrix/README.md, "First login"): the DSN names only host, port
// and database; mysqlnd logs in without TLS (caching_sha2_password full
// authentication then fetches the server's RSA key).

declare(strict_types=1);

require __DIR__ . '/../../php/common.php';

function login(): array
{
    $pdo = new PDO(sprintf('mysql:host=%s;port=%s;dbname=%s', env('MQ_HOST'), env('MQ_PORT'),
        env('MQ_DATABASE')), env('MQ_USER'), env('MQ_PASSWORD'));
    $rows = rows($pdo->query('SELECT 1 AS one, CURRENT_USER() AS user, @@character_set_client')
        ->fetchAll(PDO::FETCH_NUM));
    $ssl = $pdo->query("SHOW SESSION STATUS LIKE 'Ssl_version'")->fetch(PDO::FETCH_NUM)[1];
    return ['rows' => $rows, 'encrypted' => $ssl !== ''];
}

// The first login, then one more (a caching server's fast path).
run_checks(['defaults' => fn () => [login(), login()]]);
