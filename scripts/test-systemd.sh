#!/usr/bin/env bash
# make test-systemd: the amd64 package under a real systemd. Boots Debian
# bookworm with systemd as PID 1 in a systemd-nspawn container, installs
# dist/agent_*_amd64.deb with dpkg and checks the service as an operator
# would: start to READY, /healthz, doctor, reload, the watchdog, an invalid
# configuration, stop, MemoryMax, ProtectSystem, the exec sandbox, and the
# systemd-analyze security score, two upgrades (over a changed and an
# untouched configuration), no bubblewrap, remove and purge. Writes what it measured to
# dist/systemd-test.txt (bench/RESULTS.md quotes it).
#
#   scripts/test-systemd.sh [--soak MINUTES] [DEB]
#
# --soak (make soak) also runs scripts/soak against the service for that
# many minutes after the upgrades: a mixed load, sampled every minute (RSS,
# open files, goroutines, restarts), every message checked. Its report
# goes to bench/soak.md, which bench/RESULTS.md quotes.
#
# The host needs no systemd: nspawn runs with --register=no --keep-unit
# and the container is entered with nsenter. The Debian root (debootstrap
# from the mirror apt uses) is built once and cached under .deps/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
soak=""
if [ "${1:-}" = --soak ]; then soak=$2; shift 2; fi
deb=${1:-$(ls -t "$root"/dist/agent_*_amd64.deb 2>/dev/null | head -1)}
[ -f "$deb" ] || { echo "test-systemd: no amd64 package (make deb)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "test-systemd: run as root (nspawn, nsenter)" >&2; exit 1; }
log() { echo "test-systemd: $*" >&2; }
fail() { echo "test-systemd: FAIL: $*" >&2; exit 1; }

need=()
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

cache=$root/.deps/systemd-test/bookworm-rootfs.tar.gz
if [ ! -f "$cache" ]; then
  # The mirror apt already uses (one-line or deb822 sources).
  mirror=$( (grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list || true) | awk '{print $2; exit}')
  [ -n "$mirror" ] || mirror=$( (grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources || true) | awk '{print $2; exit}')
  [ -n "$mirror" ] || fail "no Debian mirror in apt's sources"
  log "building the bookworm root from $mirror (once; cached in $cache)"
  tmproot=$(mktemp -d)
  debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,adduser,bubblewrap,procps,curl,ca-certificates,python3 \
    bookworm "$tmproot" "$mirror" >/dev/null
  mkdir -p "$(dirname "$cache")"
  tar -C "$tmproot" -czf "$cache.tmp" . && mv "$cache.tmp" "$cache"
  rm -rf "$tmproot"
fi

work=$(mktemp -d)
rootfs=$work/rootfs
nspawn=""
cleanup() {
  if [ -n "$nspawn" ] && kill -0 "$nspawn" 2>/dev/null; then
    kill -TERM "$nspawn" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$nspawn" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$nspawn" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap "exit 130" INT TERM # run the cleanup on a kill too
mkdir -p "$rootfs"
tar -C "$rootfs" -xzf "$cache"
chmod 0755 "$rootfs" # the archive's "." is debootstrap's mktemp dir (0700)
cp "$deb" "$rootfs/root/agent.deb"
echo agent-test > "$rootfs/etc/hostname"
# D-Bus cannot reach the container's systemd under nspawn on a host
# without systemd (its activation times out and boot stays "starting");
# nothing here needs it: systemctl uses systemd's private socket.
for u in dbus.service dbus.socket systemd-logind.service; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$u"
done

log "booting the container"
systemd-nspawn -D "$rootfs" --register=no --keep-unit --boot --console=pipe -q > "$work/console.log" 2>&1 &
nspawn=$!
pid=""
for _ in $(seq 200); do
  # The container's PID 1 once it runs systemd (nspawn's child execs it).
  pid=$(pgrep -P "$nspawn" -x systemd | head -1 || true)
  [ -n "$pid" ] && break
  sleep 0.1
done
[ -n "$pid" ] || { cat "$work/console.log" >&2; fail "the container did not start"; }
ct() { nsenter -t "$pid" -a -- "$@"; }
state=""
for _ in $(seq 100); do
  state=$(ct systemctl is-system-running 2>/dev/null || true)
  case $state in running|degraded) break ;; esac
  sleep 0.2
done
case $state in running|degraded) ;; *) cat "$work/console.log" >&2; fail "the container's systemd is $state" ;; esac
# cgroup v1: nspawn mounts the memory controller read-only; systemd must
# write it to enforce MemoryMax.
if ct test -d /sys/fs/cgroup/memory; then
  ct mount -o remount,bind,rw /sys/fs/cgroup/memory
  ct systemctl daemon-reexec
fi

results=$root/dist/systemd-test.txt
: > "$results"
record() { echo "$*" | tee -a "$results" >&2; }

# 1. Install: dpkg -i runs postinst, which starts the service and shows doctor.
t0=$(date +%s.%N)
ct dpkg -i /root/agent.deb > "$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "dpkg -i"; }
grep -q "agentctl doctor says" "$work/install.log" || { cat "$work/install.log" >&2; fail "postinst showed no doctor output"; }
ready=""
for _ in $(seq 300); do
  if ct systemctl show agent -p StatusText --value 2>/dev/null | grep -q "serving on"; then ready=1; break; fi
  sleep 0.1
done
[ -n "$ready" ] || { ct journalctl -u agent --no-pager | tail -30 >&2; fail "agent did not reach READY"; }
t1=$(date +%s.%N)
record "install to READY: $(echo "$t1 - $t0" | bc 2>/dev/null || awk "BEGIN{print $t1-$t0}") s (dpkg -i, postinst, first start)"
[ "$(ct systemctl is-active agent)" = active ] || fail "agent is not active"
record "package: $(basename "$deb") $(stat -c %s "$deb" | awk '{printf "%.1f MB", $1/1e6}')"

# 2. /healthz answers on the configured address.
listen=$(ct sed -n 's/^listen *= *"\(.*\)".*/\1/p' /etc/agent/config.toml | head -1)
ct curl -fsS "http://$listen/livez" >/dev/null || fail "/livez on $listen"
ct curl -sS "http://$listen/healthz" | grep -q '"checks"' || fail "/healthz has no checks"

# 3. agentctl doctor as root (exit 1 is fine: no model key in this test).
ct agentctl -config /etc/agent/config.toml doctor > "$work/doctor.txt" 2>&1 || true
grep -q "daemon" "$work/doctor.txt" && grep -Eq "^ok +daemon|^warn +daemon" "$work/doctor.txt" || { cat "$work/doctor.txt" >&2; fail "doctor does not see the running daemon"; }

# 4. systemctl reload applies a changed setting.
ct sed -i 's/^max_results = .*/max_results = 7/' /etc/agent/config.toml
ct systemctl reload agent
for _ in $(seq 50); do ct journalctl -u agent --no-pager | grep -q "configuration reloaded" && break; sleep 0.1; done
ct journalctl -u agent --no-pager | grep -q "configuration reloaded" || fail "reload not applied"

# 5. The watchdog restarts a daemon that stops answering.
ct mkdir -p /run/systemd/system/agent.service.d
printf '[Service]\nWatchdogSec=3s\n' | ct tee /run/systemd/system/agent.service.d/watchdog.conf >/dev/null
ct systemctl daemon-reload
ct systemctl restart agent
old=$(ct systemctl show agent -p MainPID --value)
restarts=$(ct systemctl show agent -p NRestarts --value)
ct kill -STOP "$old"
new=$old
for _ in $(seq 300); do
  new=$(ct systemctl show agent -p MainPID --value)
  if [ "$new" != "$old" ] && [ "$new" != 0 ] && [ "$(ct systemctl is-active agent)" = active ]; then break; fi
  sleep 0.1
done
[ "$new" != "$old" ] || fail "the watchdog did not restart a stopped daemon"
[ "$(ct systemctl show agent -p NRestarts --value)" -gt "$restarts" ] || fail "no restart counted"
record "watchdog: a SIGSTOPped daemon (pid $old) was replaced by pid $new (WatchdogSec=3s drop-in)"
ct rm /run/systemd/system/agent.service.d/watchdog.conf
ct systemctl daemon-reload

# 6. An invalid configuration: exit 78, and no restart loop.
ct cp /etc/agent/config.toml /root/config.good
echo 'this is = = not toml' | ct tee -a /etc/agent/config.toml >/dev/null
ct systemctl restart agent 2>/dev/null || true
restarts=$(ct systemctl show agent -p NRestarts --value) # a manual start resets it
pid78=$(ct systemctl show agent -p ExecMainPID --value)
sleep 8 # longer than RestartSec
status=$(ct systemctl show agent -p ExecMainStatus --value)
[ "$status" = 78 ] || fail "invalid config: exit status $status, want 78"
after=$(ct systemctl show agent -p NRestarts --value)
[ "$after" = "$restarts" ] && [ "$(ct systemctl show agent -p ExecMainPID --value)" = "$pid78" ] ||
  { ct systemctl status agent --no-pager >&2 || true; fail "invalid config: restarted (NRestarts $restarts -> $after)"; }
[ "$(ct systemctl is-active agent || true)" = failed ] || fail "invalid config: not failed"
record "invalid configuration: exit 78, no restart in 8 s"
ct cp /root/config.good /etc/agent/config.toml
ct systemctl reset-failed agent
ct systemctl start agent
for _ in $(seq 300); do ct systemctl show agent -p StatusText --value | grep -q "serving on" && break; sleep 0.1; done

# 7. MemoryMax is the enforced limit.
mm=$(ct systemctl show agent -p MemoryMax --value)
[ "$mm" = 2147483648 ] || fail "MemoryMax is $mm"
cg=$(ct systemctl show agent -p ControlGroup --value)
limit=""
for f in "/sys/fs/cgroup/memory$cg/memory.limit_in_bytes" "/sys/fs/cgroup$cg/memory.max"; do
  if ct test -f "$f"; then limit=$(ct cat "$f"); break; fi
done
[ "$limit" = 2147483648 ] || fail "the cgroup's memory limit is '$limit', not MemoryMax"
record "MemoryMax: 2147483648 enforced by the cgroup ($limit)"

# 8. ProtectSystem=strict: only the state (and runtime) dirs are writable.
main=$(ct systemctl show agent -p MainPID --value) # a PID of the container's namespace
svc() { ct nsenter -t "$main" -m -- "$@"; }         # in the service's mount namespace
svc sh -c 'touch /var/lib/agent/.w && rm /var/lib/agent/.w' || fail "the state dir is not writable for the service"
for p in /usr/bin /etc/agent /usr/lib/agent /root /home /var/tmp/..; do
  if svc sh -c "touch $p/.w" 2>/dev/null; then fail "$p is writable inside the service"; fi
done
record "ProtectSystem=strict: /var/lib/agent writable; /usr/bin, /etc/agent, /usr/lib/agent, /root, /home not"

# 9. The exec sandbox works under the unit's hardening (the daemon's own probe).
sandbox=""
for _ in $(seq 100); do
  sandbox=$(ct curl -sS "http://$listen/healthz" | tr '{' '\n' | grep '"name":"sandbox"' || true)
  echo "$sandbox" | grep -q '"status":"ok"' && break
  sleep 0.2
done
echo "$sandbox" | grep -q '"status":"ok"' || fail "the exec sandbox does not work under the unit: $sandbox"
record "exec sandbox: bubblewrap probe ok under the unit's hardening"

# 10. Stop within 10 s.
s0=$(date +%s.%N)
ct systemctl stop agent
s1=$(date +%s.%N)
took=$(awk "BEGIN{print $s1-$s0}")
awk "BEGIN{exit !($took < 10)}" || fail "systemctl stop took $took s"
record "systemctl stop: $took s"

# 11. The exposure score.
score=$(ct systemd-analyze security agent --no-pager 2>/dev/null | sed -n 's/.*Overall exposure level for agent.service: \([0-9.]*\).*/\1/p')
record "systemd-analyze security agent: ${score:-unknown} (exposure; lower is better)"

# 12. Upgrades. Two newer packages are made from this one (dpkg-deb -R,
# a higher version, a changed packaged config.toml, dpkg-deb -b): dpkg
# runs the old prerm and the new postinst with the old version, as for any
# upgrade. Over a config the operator changed, the edit is kept (the new
# default lands beside it as config.toml.dpkg-dist); over an untouched one,
# the new default replaces it. Each upgrade restarts the running service.
repack() { # repack SUFFIX LINE OUT: this package, version+SUFFIX, LINE appended to the config
  local d=$work/repack
  rm -rf "$d" && dpkg-deb -R "$deb" "$d"
  sed -i "s/^Version: .*/&$1/" "$d/DEBIAN/control"
  echo "$2" >> "$d/etc/agent/config.toml"
  (cd "$d" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum > DEBIAN/md5sums)
  dpkg-deb --root-owner-group -Zgzip -b "$d" "$3" >/dev/null
}
upgrade() { # upgrade DEB LOG: dpkg -i as apt would run it unattended, then wait for READY
  ct env DEBIAN_FRONTEND=noninteractive dpkg -i --force-confdef --force-confold "$1" > "$2" 2>&1 || { cat "$2" >&2; fail "upgrade to $1"; }
  for _ in $(seq 300); do ct systemctl show agent -p StatusText --value | grep -q "serving on" && break; sleep 0.1; done
}
old_version=$(dpkg-deb -f "$deb" Version)
repack +up1 "# changed in the first upgrade" "$rootfs/root/agent-up1.deb"
repack +up2 "# changed in the second upgrade" "$rootfs/root/agent-up2.deb"
ct systemctl start agent
for _ in $(seq 300); do ct systemctl show agent -p StatusText --value | grep -q "serving on" && break; sleep 0.1; done
ct sed -i 's/^max_results = .*/max_results = 9/' /etc/agent/config.toml
before=$(ct systemctl show agent -p MainPID --value)
upgrade /root/agent-up1.deb "$work/upgrade1.log"
[ "$(ct dpkg-query -W -f '${Version}' agent)" = "$old_version+up1" ] || fail "upgrade 1: version is $(ct dpkg-query -W -f '${Version}' agent)"
ct grep -q '^max_results = 9' /etc/agent/config.toml || fail "upgrade 1 overwrote the changed configuration"
ct grep -q 'changed in the first upgrade' /etc/agent/config.toml && fail "upgrade 1 merged the new default into the changed configuration"
ct grep -q 'changed in the first upgrade' /etc/agent/config.toml.dpkg-dist || fail "upgrade 1: the new default is not beside the changed configuration"
after=$(ct systemctl show agent -p MainPID --value)
[ "$after" != "$before" ] && [ "$(ct systemctl is-active agent)" = active ] || fail "upgrade 1 did not restart the service"
record "upgrade $old_version -> +up1 over a changed configuration: the edit kept, the new default in config.toml.dpkg-dist, the service restarted (pid $before -> $after)"
# The operator takes the new default (as dpkg's prompt would offer): the
# next upgrade sees an untouched conffile and replaces it.
ct mv /etc/agent/config.toml.dpkg-dist /etc/agent/config.toml
ct systemctl restart agent
before=$(ct systemctl show agent -p MainPID --value)
upgrade /root/agent-up2.deb "$work/upgrade2.log"
ct grep -q 'changed in the second upgrade' /etc/agent/config.toml || fail "upgrade 2 did not install the new default over an untouched configuration"
ct test ! -e /etc/agent/config.toml.dpkg-dist || fail "upgrade 2 left a .dpkg-dist beside an untouched configuration"
after=$(ct systemctl show agent -p MainPID --value)
[ "$after" != "$before" ] && [ "$(ct systemctl is-active agent)" = active ] || fail "upgrade 2 did not restart the service"
ct test -f /var/lib/agent/agent.db || fail "the state did not survive the upgrades"
record "upgrade +up1 -> +up2 over an untouched configuration: the new default installed, no .dpkg-dist, the service restarted"

# The soak (make soak): a mixed load on the upgraded service.
if [ -n "$soak" ]; then
  gobin=$("$root/scripts/deps.sh" --which-go 2>/dev/null || echo go)
  (cd "$root" && CGO_ENABLED=0 "$gobin" build -o "$rootfs/root/soak" ./scripts/soak)
  [ -f "$root/testdata/models/bge-small-random/model.onnx" ] || fail "no test models (make testmodels)"
  mkdir -p "$rootfs/usr/share/agent/soak-models"
  cp -r "$root/testdata/models/bge-small-random" "$root/testdata/models/ggml-tiny-random-multi.bin" "$rootfs/usr/share/agent/soak-models/"
  chmod -R a+rX "$rootfs/usr/share/agent/soak-models"
  log "soak: $soak minutes of mixed load (a line a minute)"
  rc=0
  ct /root/soak -minutes "$soak" -out /root/soak.md || rc=$?
  {
    echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores of $(uname -m) ($(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)), package $(basename "$deb"), by \`make soak\` (scripts/test-systemd.sh --soak $soak) under the container's systemd."
    echo
    cat "$rootfs/root/soak.md"
  } > "$root/bench/soak.md"
  [ "$rc" = 0 ] || fail "the soak failed (bench/soak.md)"
  record "soak: $soak minutes of mixed load passed (bench/soak.md)"
fi

# 13. Without bubblewrap the daemon still starts; doctor says why exec is off.
ct dpkg -r --force-depends bubblewrap > /dev/null 2>&1
ct systemctl restart agent
for _ in $(seq 300); do ct systemctl show agent -p StatusText --value | grep -q "serving on" && break; sleep 0.1; done
[ "$(ct systemctl is-active agent)" = active ] || fail "no bubblewrap: the daemon did not start"
ct agentctl -config /etc/agent/config.toml doctor > "$work/doctor2.txt" 2>&1 || true
grep -E "sandbox" "$work/doctor2.txt" | grep -qiE "bwrap|bubblewrap" || { cat "$work/doctor2.txt" >&2; fail "no bubblewrap: doctor does not say so"; }
record "without bubblewrap: the daemon runs, doctor names bubblewrap"

# 14. Removing while it runs stops it; remove keeps the state, purge deletes it.
[ "$(ct systemctl is-active agent)" = active ] || fail "not running before the remove"
ct dpkg -r agent > /dev/null
ct pgrep -x agent >/dev/null && fail "the daemon still runs after the remove"
ct test -d /var/lib/agent || fail "remove deleted the state"
ct test -f /etc/agent/config.toml || fail "remove deleted the configuration"
ct dpkg -P agent > /dev/null
ct test ! -e /var/lib/agent || fail "purge kept the state"
record "remove (while running) stops the daemon and keeps /etc/agent and /var/lib/agent; purge deletes them"
log "passed"
