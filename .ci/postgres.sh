#!/usr/bin/env bash
# Install (Debian packages) and start a PostgreSQL server on loopback for the store tests, and
# print the URL to use as PSLURM_TEST_PG_URL. Idempotent.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  apt-get update -q >/dev/null
  apt-get install -y -q postgresql >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
if ! pg_lsclusters -h | grep -q "^$version main"; then
  pg_createcluster "$version" main >/dev/null
fi
pg_ctlcluster "$version" main start >/dev/null 2>&1 || true
for _ in $(seq 1 50); do
  pg_isready -q -h 127.0.0.1 && break
  sleep 0.2
done
port=$(pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" {print $3}')
runuser -u postgres -- psql -q -p "$port" -c \
  "DO \$\$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname='pslurm') THEN
     CREATE ROLE pslurm LOGIN CREATEDB PASSWORD 'pslurm'; END IF; END\$\$;" >/dev/null
runuser -u postgres -- psql -q -p "$port" -tc "SELECT 1 FROM pg_database WHERE datname='pslurm'" | grep -q 1 \
  || runuser -u postgres -- createdb -p "$port" -O pslurm pslurm
echo "postgresql+psycopg://pslurm:pslurm@127.0.0.1:$port/pslurm"
