package selfcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Zone is one thermal zone's reading.
type Zone struct {
	Name    string  // the zone's type, e.g. "cpu-thermal"
	Celsius float64 // degrees
}

// ReadThermal reads <sysRoot>/class/thermal/thermal_zone*/{type,temp}
// (millidegrees Celsius). sysRoot is "/sys" on a real machine and a
// fixture directory in tests. A zone that cannot be read is skipped
// (some report EINVAL or EAGAIN while their sensor is off).
func ReadThermal(sysRoot string) ([]Zone, error) {
	dirs, err := filepath.Glob(filepath.Join(sysRoot, "class", "thermal", "thermal_zone*"))
	if err != nil {
		return nil, err
	}
	sort.Slice(dirs, func(i, j int) bool { return zoneNum(dirs[i]) < zoneNum(dirs[j]) })
	var out []Zone
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, "temp"))
		if err != nil {
			continue
		}
		milli, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			continue
		}
		name := filepath.Base(d)
		if t, err := os.ReadFile(filepath.Join(d, "type")); err == nil && strings.TrimSpace(string(t)) != "" {
			name = strings.TrimSpace(string(t))
		}
		out = append(out, Zone{Name: name, Celsius: float64(milli) / 1000})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no readable thermal zones under %s", filepath.Join(sysRoot, "class", "thermal"))
	}
	return out, nil
}

func zoneNum(dir string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "thermal_zone"))
	return n
}
