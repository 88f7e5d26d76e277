// Command psdbgo runs PlanetScale's Go psdb client (github.com/planetscale/psdb,
// the library psdbproxy and `pscale connect` are built on) against a myquic
// gateway over HTTP/2, and the same statements directly against the
// gateway's MariaDB with go-sql-driver: every answer must be the same.
//
// The client is used as PlanetScale ships it: its own compression (S2 on
// every request, `s2, gzip` accepted back), protobuf codec and Basic auth.
// A recording transport checks the wire: every request and every answer
// S2-compressed, every exchange over HTTP/2. A gateway that does not take
// S2 fails the first call.
//
// Environment: MYQUIC_ADDR (host:port), MYQUIC_CA (the gateway's CA, PEM),
// MYQUIC_USER, MYQUIC_PASSWORD, MYQUIC_DIRECT_DSN (go-sql-driver DSN of the
// same backend account and database). Prints `ok`/`FAIL` per check, then
// `N passed, M failed`; exits 1 if any failed, 2 on a usage error.
package main

import (
	"context"
	"crypto/tls"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/planetscale/psdb/auth"
	psdbclient "github.com/planetscale/psdb/core/client"
	"github.com/planetscale/psdb/types/psdb/v1alpha1/psdbv1alpha1connect"
)

func main() {
	env := map[string]string{}
	for _, name := range []string{"MYQUIC_ADDR", "MYQUIC_CA", "MYQUIC_USER", "MYQUIC_PASSWORD", "MYQUIC_DIRECT_DSN"} {
		env[name] = os.Getenv(name)
		if env[name] == "" {
			fmt.Fprintf(os.Stderr, "psdbgo: %s is not set\n", name)
			os.Exit(2)
		}
	}
	tlsConfig, err := psdbclient.TLSConfigWithRoot(env["MYQUIC_CA"])
	if err != nil {
		fmt.Fprintf(os.Stderr, "psdbgo: reading MYQUIC_CA: %v\n", err)
		os.Exit(2)
	}
	// The gateway's development certificate names localhost.
	tlsConfig.ServerName = "localhost"
	wire := &recorder{next: psdbTransport(tlsConfig)}
	newClient := func(password string) psdbv1alpha1connect.DatabaseClient {
		return psdbclient.New(env["MYQUIC_ADDR"], psdbv1alpha1connect.NewDatabaseClient,
			auth.NewBasicAuth(env["MYQUIC_USER"], password),
			psdbclient.WithHTTPClient(wire))
	}
	direct, err := sql.Open("mysql", env["MYQUIC_DIRECT_DSN"])
	if err != nil {
		fmt.Fprintf(os.Stderr, "psdbgo: MYQUIC_DIRECT_DSN: %v\n", err)
		os.Exit(2)
	}
	defer direct.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t := &tally{}
	run(ctx, t, newClient(env["MYQUIC_PASSWORD"]), newClient(env["MYQUIC_PASSWORD"]+"-wrong"), direct)
	t.check("every request S2-compressed, every answer S2, all over HTTP/2", wire.verdict())
	fmt.Printf("%d passed, %d failed\n", t.passed, t.failed)
	if t.failed > 0 {
		os.Exit(1)
	}
}

// psdbTransport is the HTTP client psdb's core/client builds for itself
// (its defaultHTTPClient, unexported), here so the recorder can wrap it.
func psdbTransport(tlsConfig *tls.Config) *http.Transport {
	return &http.Transport{
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   20,
		IdleConnTimeout:       30 * time.Minute,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		DisableCompression:    true,
		TLSClientConfig:       tlsConfig,
	}
}

// tally counts and prints the checks.
type tally struct{ passed, failed int }

func (t *tally) check(name string, err error) {
	if err != nil {
		t.failed++
		fmt.Printf("FAIL %s: %v\n", name, err)
		return
	}
	t.passed++
	fmt.Printf("ok   %s\n", name)
}
