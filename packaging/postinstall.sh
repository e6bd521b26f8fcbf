#!/bin/sh
# Creates the shared lock directory now rather than at the next boot, from
# the tmpfiles.d entry the package installs. Without systemd-tmpfiles (a
# container) lockrun run as root creates it on first use.
set -e
if command -v systemd-tmpfiles >/dev/null 2>&1; then
	systemd-tmpfiles --create /usr/lib/tmpfiles.d/lockrun.conf || true
fi
