#!/usr/bin/env bash
# CI's release check: a pinned goreleaser from the Go module proxy checks
# goreleaser.yaml and builds a snapshot (archives, .deb, .rpm, checksums);
# then the .deb it built is installed on this machine, and the installed
# lockrun must print its stamped version, have its man page, and run a
# command guarded by the installed lockrun-watchdog beside it (the
# archive must hold both programs too). Root on Debian (make test runs
# it after .ci/services.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
goreleaser=(go run github.com/goreleaser/goreleaser/v2@v2.15.1)

src=.
if [ ! -e packaging/tmpfiles.d/lockrun.conf ]; then
	# The entry comes with the file backend's trust model (branch
	# filetrust). Until it lands, build from a temporary copy with a
	# stand-in, so that the rest is checked; a real release without the
	# file fails in goreleaser.
	src=$(mktemp -d)
	trap 'rm -rf "$src"' EXIT
	echo "release: packaging/tmpfiles.d/lockrun.conf is missing: building a copy with a stand-in"
	tar --exclude=./bin --exclude=./dist --exclude=./build -cf - . | tar -xf - -C "$src"
	mkdir -p "$src/packaging/tmpfiles.d"
	echo 'd /run/lock/lockrun 1777 root root -' >"$src/packaging/tmpfiles.d/lockrun.conf"
fi

cd "$src"
if [ -z "$(git remote)" ]; then
	# goreleaser reads the commit only from a clone with a remote; a
	# clone without one (a local CI checkout) gets the project's, in this
	# process's environment only.
	export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/lockrun/lockrun.git
fi
"${goreleaser[@]}" check
log=$(mktemp)
"${goreleaser[@]}" release --snapshot --clean >"$log" 2>&1 || { cat "$log"; exit 1; }
rm -f "$log"
arch=$(dpkg --print-architecture)
archives=(dist/lockrun_*_linux_"$arch".tar.gz)
listing=$(tar -tzf "${archives[0]}")
for prog in lockrun lockrun-watchdog lockrun-redis lockrun-etcd lockrun-postgres lockrun-zookeeper; do
	grep -qx "$prog" <<<"$listing" || { echo "release: ${archives[0]} has no $prog"; exit 1; }
done
debs=(dist/lockrun_*_"$arch".deb)
echo "release: installing ${debs[0]}"
dpkg -i "${debs[0]}" >/dev/null
version=$(/usr/bin/lockrun --version)
echo "release: $version"
commit=$(git rev-parse HEAD)
case $version in
*"commit ${commit:0:12}"*) ;;
*) echo "release: lockrun --version does not name commit ${commit:0:12}"; exit 1 ;;
esac
echo "release: man page at $(man -w lockrun)"
# A real run of the installed pair: the command's parent (lockrun) must
# have the installed watchdog as its other child, not itself re-executed.
lockdir=$(mktemp -d)
children=$(/usr/bin/lockrun run -b "file://$lockdir" release-check -- sh -c 'for p in $(cat /proc/$PPID/task/*/children); do readlink /proc/$p/exe; done')
rm -rf "$lockdir"
case $children in
*/usr/bin/lockrun-watchdog*) echo "release: a run of /usr/bin/lockrun was guarded by /usr/bin/lockrun-watchdog" ;;
*) echo "release: the installed lockrun's run had no /usr/bin/lockrun-watchdog beside its command (children: $children)"; exit 1 ;;
esac
# A server backend's URL: the installed lockrun starts the installed
# program with that backend's client in its place (the command's parent).
parent=$(/usr/bin/lockrun run -b redis://127.0.0.1:6379 release-check -- sh -c 'readlink /proc/$PPID/exe')
case $parent in
/usr/bin/lockrun-redis) echo "release: a redis:// run of /usr/bin/lockrun ran in /usr/bin/lockrun-redis" ;;
*) echo "release: a redis:// run of /usr/bin/lockrun ran in ${parent:-nothing}, not /usr/bin/lockrun-redis"; exit 1 ;;
esac
