package selfcheck

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// Tegrastats is one line of NVIDIA's tegrastats utility (Jetson boards):
//
//	RAM 2448/7620MB (lfb 2x4MB) SWAP 0/3810MB (cached 0MB) CPU [12%@1510,off,...]
//	EMC_FREQ 0% GR3D_FREQ 0% cpu@47.5C soc2@46.8C ... VDD_IN 4469mW/4469mW ...
//
// Fields missing from the line are zero (-1 for the percentages).
type Tegrastats struct {
	RAMUsedMB, RAMTotalMB   int
	SwapUsedMB, SwapTotalMB int
	CPU                     []CPUCore
	EMCPercent              int // memory controller load; -1 when absent
	GPUPercent              int // GR3D_FREQ; -1 when absent
	Temps                   map[string]float64
	PowerMW                 map[string]int // current draw per rail
}

// CPUCore is one entry of the CPU [...] list.
type CPUCore struct {
	Online  bool
	Percent int
	MHz     int
}

// ErrNotTegrastats means the line has none of tegrastats' fields.
var ErrNotTegrastats = errors.New("not a tegrastats line")

// ParseTegrastats parses one tegrastats line. Unknown fields are ignored,
// so newer JetPack releases with more rails still parse.
func ParseTegrastats(line string) (Tegrastats, error) {
	t := Tegrastats{EMCPercent: -1, GPUPercent: -1, Temps: map[string]float64{}, PowerMW: map[string]int{}}
	f := strings.Fields(line)
	known := false
	for i := 0; i < len(f); i++ {
		tok := f[i]
		next := ""
		if i+1 < len(f) {
			next = f[i+1]
		}
		switch tok {
		case "RAM":
			if u, tot, ok := usedTotal(next); ok {
				t.RAMUsedMB, t.RAMTotalMB, known = u, tot, true
				i++
			}
			continue
		case "SWAP":
			if u, tot, ok := usedTotal(next); ok {
				t.SwapUsedMB, t.SwapTotalMB, known = u, tot, true
				i++
			}
			continue
		case "CPU":
			if strings.HasPrefix(next, "[") {
				t.CPU, known = parseCores(next), true
				i++
			}
			continue
		case "EMC_FREQ", "GR3D_FREQ":
			p, ok := percent(next)
			if !ok {
				continue
			}
			if tok == "EMC_FREQ" {
				t.EMCPercent = p
			} else {
				t.GPUPercent = p
			}
			known = true
			i++
			continue
		}
		// name@47.5C
		if name, v, ok := strings.Cut(tok, "@"); ok && strings.HasSuffix(v, "C") && name != "" {
			if c, err := strconv.ParseFloat(strings.TrimSuffix(v, "C"), 64); err == nil {
				t.Temps[strings.ToLower(name)], known = c, true
			}
			continue
		}
		// VDD_IN 4469mW/4469mW (current/average)
		if strings.HasSuffix(next, "mW") && strings.Contains(next, "mW/") && isRail(tok) {
			cur, _, _ := strings.Cut(next, "/")
			if mw, err := strconv.Atoi(strings.TrimSuffix(cur, "mW")); err == nil {
				t.PowerMW[tok], known = mw, true
			}
			i++
		}
	}
	if !known {
		return Tegrastats{}, ErrNotTegrastats
	}
	return t, nil
}

func isRail(s string) bool {
	for _, r := range s {
		if !(r == '_' || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')) {
			return false
		}
	}
	return s != ""
}

// usedTotal reads "2448/7620MB".
func usedTotal(s string) (int, int, bool) {
	u, tot, ok := strings.Cut(strings.TrimSuffix(s, "MB"), "/")
	if !ok {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(u)
	b, err2 := strconv.Atoi(tot)
	if err1 != nil || err2 != nil || a < 0 || b < 0 {
		return 0, 0, false
	}
	return a, b, true
}

// percent reads "0%" or "0%@1300".
func percent(s string) (int, bool) {
	p, _, _ := strings.Cut(s, "@")
	n, err := strconv.Atoi(strings.TrimSuffix(p, "%"))
	if err != nil || !strings.HasSuffix(p, "%") {
		return 0, false
	}
	return n, true
}

// parseCores reads "[12%@1510,off,3%@1510]".
func parseCores(s string) []CPUCore {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	var out []CPUCore
	for _, c := range strings.Split(s, ",") {
		if c == "off" || c == "" {
			out = append(out, CPUCore{})
			continue
		}
		p, mhz, _ := strings.Cut(c, "@")
		pc, err := strconv.Atoi(strings.TrimSuffix(p, "%"))
		if err != nil {
			continue
		}
		m, _ := strconv.Atoi(mhz)
		out = append(out, CPUCore{Online: true, Percent: pc, MHz: m})
	}
	return out
}

// ParseNVPModel reads the power mode from `nvpmodel -q` ("NV Power Mode: 15W").
func ParseNVPModel(out string) (string, error) {
	for _, line := range strings.Split(out, "\n") {
		if _, mode, ok := strings.Cut(line, "NV Power Mode:"); ok {
			if m := strings.TrimSpace(mode); m != "" {
				return m, nil
			}
		}
	}
	return "", errors.New("nvpmodel: no power mode in its output")
}

// Summary is one line about the board.
func (t Tegrastats) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "RAM %d/%d MB", t.RAMUsedMB, t.RAMTotalMB)
	if t.SwapTotalMB > 0 {
		fmt.Fprintf(&b, ", swap %d/%d MB", t.SwapUsedMB, t.SwapTotalMB)
	}
	online, load := 0, 0
	for _, c := range t.CPU {
		if c.Online {
			online++
			load += c.Percent
		}
	}
	if online > 0 {
		fmt.Fprintf(&b, ", CPU %d%% avg on %d/%d cores", load/online, online, len(t.CPU))
	}
	if t.GPUPercent >= 0 {
		fmt.Fprintf(&b, ", GPU %d%%", t.GPUPercent)
	}
	if t.EMCPercent >= 0 {
		fmt.Fprintf(&b, ", EMC %d%%", t.EMCPercent)
	}
	if hot, c := t.Hottest(); hot != "" {
		fmt.Fprintf(&b, ", hottest %s %.1f°C", hot, c)
	}
	if mw, ok := t.PowerMW["VDD_IN"]; ok {
		fmt.Fprintf(&b, ", board %.1f W", float64(mw)/1000)
	}
	return b.String()
}

// Hottest is the highest temperature in the line (tegrastats reports
// -256C for a sensor that is off; those are ignored).
func (t Tegrastats) Hottest() (string, float64) {
	name, max := "", -100.0
	for n, c := range t.Temps {
		if c > max || (c == max && n < name) {
			name, max = n, c
		}
	}
	return name, max
}

// CommandTegrastats runs the tegrastats binary (when present) and returns
// its first line. It returns exec.ErrNotFound off a Jetson.
func CommandTegrastats(ctx context.Context) (string, error) {
	path, err := exec.LookPath("tegrastats")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--interval", "500")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	defer cmd.Wait()
	defer cancel() // stops tegrastats before Wait
	sc := bufio.NewScanner(out)
	if sc.Scan() {
		return sc.Text(), nil
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("tegrastats printed nothing")
}

// CommandNVPModel runs `nvpmodel -q` (when present).
func CommandNVPModel(ctx context.Context) (string, error) {
	path, err := exec.LookPath("nvpmodel")
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, path, "-q").Output()
	if err != nil {
		return "", fmt.Errorf("nvpmodel -q: %w", err)
	}
	return string(out), nil
}
