<?php
// mysqli's first logins with PHP's default options (contract:
// tests/matrix/README.md, "First login"): mysqlnd logs in without TLS
// unless asked (caching_sha2_password full authentication then fetches
// the server's RSA key), and with TLS unverified when asked with
// MYSQLI_CLIENT_SSL | MYSQLI_CLIENT_SSL_DONT_VERIFY_SERVER_CERT.

declare(strict_types=1);

require __DIR__ . '/../../php/common.php';

function login(int $flags): array
{
    $m = mysqli_init();
    $m->real_connect(env('MQ_HOST'), env('MQ_USER'), env('MQ_PASSWORD'), env('MQ_DATABASE'),
        (int) env('MQ_PORT'), null, $flags);
    $rows = rows($m->query('SELECT 1 AS one, CURRENT_USER() AS user')->fetch_all(MYSQLI_NUM));
    $ssl = $m->query("SHOW SESSION STATUS LIKE 'Ssl_version'")->fetch_row()[1];
    $m->close();
    return ['rows' => $rows, 'encrypted' => $ssl !== ''];
}

run_checks([
    // The first login, then one more (a caching server's fast path).
    'defaults' => fn () => [login(0), login(0)],
    'tls_skip_verify' => fn () => [login(MYSQLI_CLIENT_SSL | MYSQLI_CLIENT_SSL_DONT_VERIFY_SERVER_CERT),
        login(MYSQLI_CLIENT_SSL | MYSQLI_CLIENT_SSL_DONT_VERIFY_SERVER_CERT)],
]);
