#!/usr/bin/env bash
# Installs the reference MCP servers that pkg/mcp's integration tests run
# against, under .deps/mcp (ignored by git). Idempotent: does nothing when
# the pinned versions are already installed.
#
#   scripts/mcp-servers.sh          # install if missing
#   FORCE=1 scripts/mcp-servers.sh  # reinstall
set -euo pipefail

EVERYTHING_VERSION=2026.8.31
FILESYSTEM_VERSION=2026.8.31

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="$root/.deps/mcp"

installed_version() { # package
	local pj="$prefix/node_modules/$1/package.json"
	[[ -f "$pj" ]] || return 0
	node -e 'process.stdout.write(require(process.argv[1]).version)' "$pj" 2>/dev/null || true
}

if [[ "${FORCE:-}" != 1 ]] &&
	[[ "$(installed_version @modelcontextprotocol/server-everything)" == "$EVERYTHING_VERSION" ]] &&
	[[ "$(installed_version @modelcontextprotocol/server-filesystem)" == "$FILESYSTEM_VERSION" ]] &&
	[[ -x "$prefix/node_modules/.bin/mcp-server-everything" ]] &&
	[[ -x "$prefix/node_modules/.bin/mcp-server-filesystem" ]]; then
	echo "mcp-servers: already installed in $prefix"
	exit 0
fi

command -v npm >/dev/null || { echo "mcp-servers: npm not found (install nodejs and npm)" >&2; exit 1; }
mkdir -p "$prefix"
npm install --no-audit --no-fund --prefix "$prefix" \
	"@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
	"@modelcontextprotocol/server-filesystem@$FILESYSTEM_VERSION"
echo "mcp-servers: installed in $prefix"
