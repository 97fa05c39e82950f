#!/usr/bin/env bash
# What `pnpm test` needs beyond node_modules, installed from Debian's packages when missing (as root), so that the
# README's test command works on a fresh machine: redis-server and nats-server (the Redis and NATS tests start their
# own on a free port; Debian puts nats-server in /usr/sbin) and
# chromium (the dashboard's browser test drives it through playwright-core; Playwright's own download needs a
# network these machines do not have).
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || missing+=(nats-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "pnpm test needs Debian's ${missing[*]}: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
