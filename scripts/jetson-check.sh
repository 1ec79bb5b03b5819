#!/bin/sh
# What agentctl doctor cannot see on a Jetson: the L4T/JetPack release,
# the power mode (nvpmodel) and clocks, CUDA, tegrastats, thermal zones,
# memory and swap, and whether the agent user reaches the GPU and sound
# devices. Prints one line per check (ok|warn|info NAME detail) and the
# advice that goes with it; changes nothing. Runs on any Linux: off a
# Jetson most lines say "not a Jetson".
#
#   sudo scripts/jetson-check.sh
set -u
line() { printf '%-5s %-14s %s\n' "$1" "$2" "$3"; }

if [ -r /etc/nv_tegra_release ]; then
  line ok l4t "$(head -1 /etc/nv_tegra_release | tr -s ' ')"
  jetson=1
else
  line info l4t "not a Jetson (no /etc/nv_tegra_release)"
  jetson=0
fi
glibc=$(ldd --version 2>/dev/null | head -1 | awk '{print $NF}')
case $glibc in
  2.3[4-9]*|2.[4-9]*) line ok glibc "$glibc (the package needs 2.34 or newer)" ;;
  *) line warn glibc "${glibc:-unknown}: the package needs glibc 2.34 (JetPack 6); on JetPack 5 build on the device" ;;
esac

if command -v nvpmodel >/dev/null 2>&1; then
  mode=$(nvpmodel -q 2>/dev/null | head -1)
  line info power-mode "${mode:-unknown} (for steady latency: sudo nvpmodel -m 0 (MAXN or the highest your module has); to save power keep the 15 W mode)"
else
  [ "$jetson" = 1 ] && line warn power-mode "nvpmodel missing (nvidia-l4t-tools)"
fi
if command -v jetson_clocks >/dev/null 2>&1; then
  line info clocks "sudo jetson_clocks --show lists them; sudo jetson_clocks pins them at maximum (lower, steadier latency; more heat)"
fi

cuda=""
for d in /usr/local/cuda /usr/local/cuda-12* /usr/local/cuda-11*; do
  [ -x "$d/bin/nvcc" ] && cuda=$d && break
done
if [ -n "$cuda" ]; then
  line ok cuda "$("$cuda/bin/nvcc" --version | tail -1) at $cuda (the GPU builds of whisper.cpp and ONNX Runtime can use it; see README)"
elif [ -e /usr/lib/aarch64-linux-gnu/tegra/libcuda.so ] || ls /usr/lib/aarch64-linux-gnu/libcuda.so* >/dev/null 2>&1; then
  line warn cuda "the driver is there but no CUDA toolkit (apt install nvidia-jetpack or cuda-toolkit-12-2 to build for the GPU)"
else
  line info cuda "none: speech and embeddings run on the CPU (fine for bge-small and whisper tiny/base)"
fi

if command -v tegrastats >/dev/null 2>&1; then
  sample=$(timeout 2 tegrastats --interval 1000 2>/dev/null | head -1)
  line ok tegrastats "${sample:-no sample within 2 s}"
else
  [ "$jetson" = 1 ] && line warn tegrastats "missing (nvidia-l4t-tools); the self-check reports temperatures without it"
fi

hot=""
for z in /sys/class/thermal/thermal_zone*; do
  [ -r "$z/temp" ] || continue
  t=$(cat "$z/temp" 2>/dev/null) || continue
  name=$(cat "$z/type" 2>/dev/null || basename "$z")
  c=$((t / 1000))
  if [ "$c" -ge 85 ]; then hot="$hot $name=${c}C"; fi
  line info thermal "$name ${c}°C"
done
[ -n "$hot" ] && line warn thermal "hot:$hot (check the fan and the case; the SoC throttles near 95°C)"

mem=$(awk '/MemTotal/ {printf "%d", $2/1024}' /proc/meminfo)
swap=$(awk '/SwapTotal/ {printf "%d", $2/1024}' /proc/meminfo)
if [ "${mem:-0}" -lt 3500 ]; then
  line warn memory "${mem} MiB RAM: the unit's MemoryMax=2G leaves little for the rest; use whisper tiny and bge-small"
else
  line ok memory "${mem} MiB RAM, ${swap} MiB swap (the unit runs with MemorySwapMax=0)"
fi
if [ "$jetson" = 1 ] && [ -e /etc/systemd/nvzramconfig.sh ]; then
  line info zram "nvzramconfig is on (zram swap); the agent itself does not swap"
fi

if getent passwd agent >/dev/null 2>&1; then
  groups=$(id -nG agent 2>/dev/null)
  for g in audio video render; do
    if getent group "$g" >/dev/null && ! echo " $groups " | grep -q " $g "; then
      line warn groups "agent is not in $g (sudo adduser agent $g; systemctl restart agent)"
    fi
  done
  line ok user "agent: $groups"
else
  line warn user "no agent user (install the package: apt install ./agent_VERSION_arm64.deb)"
fi
for dev in /dev/nvhost-ctrl /dev/nvmap /dev/snd; do
  [ "$jetson" = 1 ] || break
  [ -e "$dev" ] && line ok device "$dev present" || line warn device "$dev missing"
done

if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  state=$(systemctl is-active agent 2>/dev/null)
  line info service "agent.service is ${state:-unknown}; agentctl doctor checks the rest"
fi
exit 0
