#!/bin/sh
# The streaming replica: on first start (an empty data directory), a base backup of the primary, which also writes
# standby.signal and the connection to follow, through the slot the primary made for it (postgres/primary-init.sh);
# then PostgreSQL as a hot standby. A replica rebuilt from scratch takes the same slot again.
set -eu
: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD in deploy/.env}"
export PGPASSWORD="$REPLICATION_PASSWORD"
primary_host="${PRIMARY_HOST:-db}"
primary_port="${PRIMARY_PORT:-5432}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    until pg_isready --host "$primary_host" --port "$primary_port" --quiet; do sleep 1; done
    pg_basebackup --host "$primary_host" --port "$primary_port" --username replicator --pgdata "$PGDATA" \
        --wal-method stream --write-recovery-conf --slot replica_1 --checkpoint fast --progress
    chmod 0700 "$PGDATA"
fi
exec postgres -c hot_standby=on -c hot_standby_feedback=on
