#!/usr/bin/env bash
# What `pnpm test` needs beyond node_modules, installed from Debian's packages when missing (as root), so that the
# README's test command works on a fresh machine: redis-server (the Redis tests start their own on a free port) and
# chromium (the dashboard's browser test drives it through playwright-core; Playwright's own download needs a
# network these machines do not have).
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "pnpm test needs Debian's ${missing[*]}: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
