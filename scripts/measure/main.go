// Command measure starts the built daemon the way systemd does (with a
// notify socket) and reports start-to-READY and settled RSS for three
// set-ups: no models, the embedding model, both models. It prints Markdown
// table rows for scripts/bench.sh.
//
//	go run ./scripts/measure -bin bin/agent -models testdata/models
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "bin/agent", "daemon binary")
	models := flag.String("models", "testdata/models", "folder with bge-small-random/ and ggml-tiny-random-multi.bin")
	runs := flag.Int("runs", 5, "starts per set-up (median reported)")
	only := flag.String("only", "", "measure only the set-up of this name (\"no models\"); empty: all")
	label := flag.String("label", "", "first column instead of the set-up's name")
	noHeader := flag.Bool("noheader", false, "rows only, no table header")
	restart := flag.Bool("restart", false, "measure restarts on one state directory (its first start, which creates the database, is not counted) instead of first starts on fresh ones")
	flag.Parse()
	if err := run(*bin, *models, *runs, *only, *label, *noHeader, *restart); err != nil {
		fmt.Fprintln(os.Stderr, "measure:", err)
		os.Exit(1)
	}
}

type setup struct {
	name, embedDir, asrModel string
}

func run(bin, models string, runs int, only, label string, noHeader, restart bool) error {
	bin, _ = filepath.Abs(bin)
	models, _ = filepath.Abs(models)
	setups := []setup{
		{"no models", "/nonexistent", "/nonexistent.bin"},
		{"bge-small (random weights)", filepath.Join(models, "bge-small-random"), "/nonexistent.bin"},
		{"bge-small + whisper tiny (random weights)", filepath.Join(models, "bge-small-random"), filepath.Join(models, "ggml-tiny-random-multi.bin")},
		{"bge-small int8 (random weights)", filepath.Join(models, "bge-small-int8-random"), "/nonexistent.bin"},
		{"bge-small int8 + whisper tiny (random weights)", filepath.Join(models, "bge-small-int8-random"), filepath.Join(models, "ggml-tiny-random-multi.bin")},
	}
	if !noHeader {
		fmt.Println("| set-up | start to READY (median of", runs, ") | all models loaded | RSS after settling |")
		fmt.Println("|---|---|---|---|")
	}
	for _, s := range setups {
		if only != "" && s.name != only {
			continue
		}
		name := s.name
		if label != "" {
			name = label
		}
		var ready, loaded []time.Duration
		var rss []int64
		dir := "" // a fresh state directory per start
		if restart {
			d, err := os.MkdirTemp("", "agent-measure-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(d)
			if _, _, _, err := once(bin, s, d); err != nil { // creates the database
				return fmt.Errorf("%s: %w", s.name, err)
			}
			dir = d
		}
		for i := 0; i < runs; i++ {
			r, l, m, err := once(bin, s, dir)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			ready, loaded, rss = append(ready, r), append(loaded, l), append(rss, m)
		}
		fmt.Printf("| %s | %s | %s | %.1f MB |\n", name, median(ready).Round(100*time.Microsecond), median(loaded).Round(time.Millisecond), float64(medianInt(rss))/1e6)
	}
	return nil
}

// once starts bin in dir ("": a new temporary directory) and measures it.
func once(bin string, s setup, dir string) (ready, loaded time.Duration, rss int64, err error) {
	if dir == "" {
		if dir, err = os.MkdirTemp("", "agent-measure-"); err != nil {
			return
		}
		defer os.RemoveAll(dir)
	}
	cfg := fmt.Sprintf(`[agent]
state_dir = "var"
[server]
listen = "127.0.0.1:0"
admin_socket = "var/agent.sock"
[embedding]
model_dir = %q
threads = 2
[asr]
model = %q
threads = 2
`, s.embedDir, s.asrModel)
	if err = os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		return
	}
	sock := filepath.Join(dir, "notify.sock")
	os.Remove(sock) // a restart's
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return
	}
	defer conn.Close()
	cmd := exec.Command(bin, "-config", filepath.Join(dir, "config.toml"), "-log-level", "warn")
	cmd.Dir = dir
	cmd.Env = []string{"NOTIFY_SOCKET=" + sock, "PATH=" + os.Getenv("PATH")}
	start := time.Now()
	if err = cmd.Start(); err != nil {
		return
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	buf := make([]byte, 4096)
	conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	for loaded == 0 {
		n, rerr := conn.Read(buf)
		if rerr != nil {
			return 0, 0, 0, fmt.Errorf("waiting for READY: %w", rerr)
		}
		msg := string(buf[:n])
		if strings.Contains(msg, "READY=1") {
			ready = time.Since(start)
		}
		if strings.Contains(msg, "local models ready") {
			loaded = time.Since(start)
		}
	}
	time.Sleep(2 * time.Second) // let background start-up work finish
	rss, err = vmRSS(cmd.Process.Pid)
	return
}

func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

func medianInt(v []int64) int64 {
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[len(v)/2]
}
