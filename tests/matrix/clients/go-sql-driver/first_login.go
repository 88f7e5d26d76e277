package main

// The driver's first logins (contract: tests/matrix/README.md, "First
// login"): with its default options (no TLS), and asking for TLS without
// verifying the server, as `tls=skip-verify` users do, on TLS 1.2 and 1.3.

import (
	"crypto/tls"
	"database/sql"

	"github.com/go-sql-driver/mysql"
)

const firstLoginSQL = "SELECT 1 AS one, CURRENT_USER() AS user"

// firstLogin opens a pool with these DSN parameters, logs in and queries.
func firstLogin(params string) (any, error) {
	db, err := sql.Open("mysql", dsn(params))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return queryAll(db, firstLoginSQL)
}

func firstLogins() {
	// Unverified TLS limited to 1.2, which a server must still offer.
	if err := mysql.RegisterTLSConfig("tls12", &tls.Config{
		InsecureSkipVerify: true,
		MaxVersion:         tls.VersionTLS12,
	}); err != nil {
		panic(err)
	}
	check("defaults", func() (any, error) {
		// The first login, then one more (a caching server's fast path).
		first, err := firstLogin("")
		if err != nil {
			return nil, err
		}
		second, err := firstLogin("")
		return []any{first, second}, err
	})
	check("tls_skip_verify", func() (any, error) { return firstLogin("tls=skip-verify") })
	check("tls_preferred", func() (any, error) { return firstLogin("tls=preferred") })
	check("tls_1_2", func() (any, error) { return firstLogin("tls=tls12") })
}
