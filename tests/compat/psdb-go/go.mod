module myquic/compat/psdbgo

go 1.24.5

require (
	connectrpc.com/connect v1.18.1
	github.com/go-sql-driver/mysql v1.10.1
	github.com/planetscale/psdb v0.0.0-20250717190954-65c6661ab6e4
	github.com/planetscale/vitess-types v0.0.0-20250409004758-020920d5ec5a
	google.golang.org/protobuf v1.35.1
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/klauspost/compress v1.16.7 // indirect
	github.com/klauspost/connect-compress/v2 v2.0.0 // indirect
	github.com/planetscale/vtprotobuf v0.6.0 // indirect
	github.com/segmentio/asm v1.2.0 // indirect
	golang.org/x/sys v0.11.0 // indirect
)
