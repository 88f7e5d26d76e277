"""sysbench's oltp_read_write through the matrix (contract:
tests/matrix/README.md): prepare, a short run with two threads, cleanup.
sysbench uses server-side prepared statements by default; a second run
turns them off. The answer is what must not vary: exit codes, zero errors
and reconnects, and that transactions ran (their number, like the count of
deadlocks sysbench retries, is timing)."""

import json
import os
import re
import subprocess
import sys

ENV = os.environ
TABLES, ROWS, SECONDS = 2, 10000, 3


def sysbench(command, *extra):
    cmd = ["sysbench", "oltp_read_write", "--db-driver=mysql",
           f"--mysql-host={ENV['MQ_HOST']}", f"--mysql-port={ENV['MQ_PORT']}",
           f"--mysql-user={ENV['MQ_USER']}", f"--mysql-password={ENV['MQ_PASSWORD']}",
           f"--mysql-db={ENV['MQ_DATABASE']}", f"--tables={TABLES}", f"--table-size={ROWS}",
           *extra, command]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd="/tmp")
    sys.stderr.write(p.stdout + p.stderr)
    return p


def figure(out, name):
    m = re.search(rf"{name}:\s+(\d+)", out)
    return int(m.group(1)) if m else None


def workload(*extra):
    run = sysbench("run", "--threads=2", f"--time={SECONDS}", "--report-interval=0", *extra)
    return {"exit": run.returncode, "fatal": [line for line in run.stderr.splitlines()
                                              if "FATAL" in line],
            "ran_transactions": (figure(run.stdout, "transactions") or 0) > 0,
            # Deadlocks between the two threads (1213) are retried by
            # sysbench and counted as "ignored errors": timing, not a
            # difference between servers. Any other error is fatal (above).
            "reconnects": figure(run.stdout, "reconnects")}


def main():
    lines = []
    sysbench("cleanup")
    # The first connection: caching_sha2_password full authentication over
    # plain TCP (libmariadb fetches the server's RSA key).
    prepare = sysbench("prepare")
    lines.append({"check": "connect", "answer": {"prepare_exit": prepare.returncode}})
    if prepare.returncode == 0:
        answer = {"prepared_statements": workload(), "text_queries": workload("--db-ps-mode=disable")}
        cleanup = sysbench("cleanup")
        answer["cleanup_exit"] = cleanup.returncode
        lines.append({"check": "sysbench_oltp_read_write", "answer": answer})
    else:
        lines.append({"check": "sysbench_oltp_read_write", "error": prepare.stderr[-2000:]})
    lines.append({"check": "tls", "skip": "sysbench 1.0's --mysql-ssl reads fixed file names "
                  "from the working directory"})
    for check in ["types_text", "types_prepared", "transactions", "errors", "procedure",
                  "multi_statement", "large_result", "last_insert_id", "switch_database",
                  "pool_reset_ping", "cursor"]:
        lines.append({"check": check, "skip": "sysbench runs only its own workload"})
    for line in lines:
        print(json.dumps(line), flush=True)


main()
