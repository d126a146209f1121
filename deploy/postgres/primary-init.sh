#!/bin/sh
# Run once by the PostgreSQL image when it initialises the primary's data directory: the role the streaming
# replica connects as, allowed to replicate from the compose network with its password, and the replica's slot
# (the primary keeps the WAL the replica has not read yet, up to max_slot_wal_keep_size).
set -eu
: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD in deploy/.env}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    --set password="$REPLICATION_PASSWORD" <<'SQL'
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD :'password';
SELECT pg_create_physical_replication_slot('replica_1');
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
