#!/usr/bin/env bash
# What-if (not part of `pnpm bench`): the two sources a log relay can read, side by
# side on one wal_level=logical PostgreSQL (PG_PORT, default 25433: `scripts/services pg-private up`).
#  write: pgbench tx/s of an order-row transaction, plain / + outbox-table insert (a published
#         table) / + pg_logical_emit_message(true, ..., 1 KB), with a slot on each source so the
#         server keeps the WAL a relay would read;
#  read:  seconds for pgoutput, through the SQL interface (pg_logical_slot_peek_binary_changes),
#         to decode N events of each kind.
#   bash bench/src/experiments/log-sources.sh [clients=4] [seconds=8] [n=20000]
set -euo pipefail
PG_PORT=${PG_PORT:-25433}
clients=${1:-4}
seconds=${2:-8}
n=${3:-20000}
bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
psql=(psql -X -q -At -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres)
dir=$(mktemp -d)
trap 'rm -rf "$dir"; "${psql[@]}" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('"'"'ls_table'"'"','"'"'ls_msg'"'"')" >/dev/null; "${psql[@]}" -c "DROP TABLE IF EXISTS ls_order, ls_outbox; DROP PUBLICATION IF EXISTS ls_table, ls_msg" >/dev/null' EXIT

"${psql[@]}" <<'SQL'
DROP TABLE IF EXISTS ls_order, ls_outbox;
DROP PUBLICATION IF EXISTS ls_table, ls_msg;
CREATE TABLE ls_order (id bigserial PRIMARY KEY, customer text, total numeric, created_at timestamptz DEFAULT now());
CREATE TABLE ls_outbox (seq bigserial PRIMARY KEY, id uuid NOT NULL, topic text NOT NULL, key text, headers jsonb, payload bytea, created_at timestamptz DEFAULT now());
CREATE PUBLICATION ls_table FOR TABLE ls_outbox;
CREATE PUBLICATION ls_msg;
SELECT 'slot ' || slot_name FROM pg_create_logical_replication_slot('ls_table', 'pgoutput');
SELECT 'slot ' || slot_name FROM pg_create_logical_replication_slot('ls_msg', 'pgoutput');
SQL

cat > "$dir/plain.sql" <<'SQL'
BEGIN;
INSERT INTO ls_order (customer, total) VALUES ('c' || (random() * 1000)::int, 42);
COMMIT;
SQL
cat > "$dir/table.sql" <<'SQL'
BEGIN;
INSERT INTO ls_order (customer, total) VALUES ('c' || (random() * 1000)::int, 42);
INSERT INTO ls_outbox (id, topic, key, headers, payload) VALUES (gen_random_uuid(), 'orders', 'k', '{"event-id":"x"}', convert_to(repeat('x', 1024), 'UTF8'));
COMMIT;
SQL
cat > "$dir/message.sql" <<'SQL'
BEGIN;
INSERT INTO ls_order (customer, total) VALUES ('c' || (random() * 1000)::int, 42);
SELECT pg_logical_emit_message(true, 'effect-outbox', convert_to(repeat('x', 1100), 'UTF8'));
COMMIT;
SQL

tps() { "$bin/pgbench" -n -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "$clients" -j "$clients" -T "$seconds" -f "$dir/$1.sql" postgres 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | cut -d. -f1; }
echo "write, $clients clients, ${seconds}s each (tx/s), two rounds interleaved:"
for round in 1 2; do
  p=$(tps plain); t=$(tps table); m=$(tps message)
  echo "  round $round: plain $p | + outbox-table insert $t (x$(echo "scale=2; $t/$p" | bc)) | + emit_message $m (x$(echo "scale=2; $m/$p" | bc))"
done

# Read side: consume what pgbench wrote, then N fresh events of each kind, and time the decode.
"${psql[@]}" -c "SELECT count(*) FROM pg_logical_slot_get_binary_changes('ls_table', NULL, NULL, 'proto_version', '1', 'publication_names', 'ls_table')" >/dev/null
"${psql[@]}" -c "SELECT count(*) FROM pg_logical_slot_get_binary_changes('ls_msg', NULL, NULL, 'proto_version', '1', 'publication_names', 'ls_msg', 'messages', 'true')" >/dev/null
"${psql[@]}" -c "INSERT INTO ls_outbox (id, topic, key, headers, payload) SELECT gen_random_uuid(), 'orders', 'k', '{}', convert_to(repeat('x', 1024), 'UTF8') FROM generate_series(1, $n)"
"${psql[@]}" -c "SELECT count(pg_logical_emit_message(true, 'effect-outbox', convert_to(repeat('x', 1100), 'UTF8'))) FROM generate_series(1, $n)" >/dev/null
"${psql[@]}" -c "CHECKPOINT" >/dev/null
sleep 1
ms() { local s e; s=$(date +%s%N); "${psql[@]}" -c "$1" >/dev/null; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
rt=$(ms "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('ls_table', NULL, NULL, 'proto_version', '1', 'publication_names', 'ls_table')")
rm_=$(ms "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('ls_msg', NULL, NULL, 'proto_version', '1', 'publication_names', 'ls_msg', 'messages', 'true')")
echo "read, $n events through the SQL interface: table inserts ${rt} ms ($(( n * 1000 / (rt > 0 ? rt : 1) ))/s) | messages ${rm_} ms ($(( n * 1000 / (rm_ > 0 ? rm_ : 1) ))/s)"
