#!/usr/bin/env bash
# Installs what lockrun's tests need on Debian and starts the shared
# servers. Tests start their own private redis-server and etcd on free
# loopback ports (they stop, freeze and restart them); PostgreSQL is the
# machine's, started here when it is not running.
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v etcd >/dev/null || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
command -v flock >/dev/null || need+=(util-linux)
[ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null || need+=(zookeeper)
[ -f /usr/lib/python3/dist-packages/kazoo/recipe/lock.py ] || need+=(python3-kazoo)
# the release check reads the installed man page; the completion tests
# drive bash, zsh and fish
command -v man >/dev/null || need+=(man-db)
command -v zsh >/dev/null || need+=(zsh)
command -v fish >/dev/null || need+=(fish)
[ -x /usr/lib/postgresql/15/bin/postgres ] || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
	echo "services: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need[@]}" >/dev/null
fi

# PostgreSQL on 127.0.0.1:5432 (apt starts nothing without systemd).
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
	echo "services: starting PostgreSQL"
	cluster=$(ls /etc/postgresql | sort -V | tail -1)
	pg_ctlcluster --skip-systemctl-redirect "$cluster" main start
	for _ in $(seq 50); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.2; done
fi
# The tests connect as postgres over TCP without a password (this kind of
# machine trusts loopback). A stock Debian cluster asks for a password:
# trust user postgres from 127.0.0.1 only, and say so.
if [ -z "${LOCKRUN_TEST_POSTGRES:-}" ] && ! psql -w -h 127.0.0.1 -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1; then
	hba=$(su postgres -c "psql -Atqc 'show hba_file'")
	echo "services: letting user postgres in from 127.0.0.1 without a password ($hba), for the tests"
	sed -i '1i host all postgres 127.0.0.1/32 trust' "$hba"
	su postgres -c "psql -Atqc 'select pg_reload_conf()'" >/dev/null
	psql -w -h 127.0.0.1 -U postgres -d postgres -Atqc 'select 1' >/dev/null
fi
echo "services: ready"
