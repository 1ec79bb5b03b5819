package plugin

import (
	"context"
	"io"
	"os"
	"os/exec"
	"sync"
)

// Spec is how to start a plugin.
type Spec struct {
	Command string
	Args    []string
	Env     []string // the whole environment
	Dir     string   // working directory
}

// Process is a started plugin, as a connection drives it.
type Process interface {
	Stdin() io.Writer
	Stdout() io.Reader
	Stderr() io.Reader // nil: none
	// CloseStdin gives the plugin end-of-file (asks it to stop).
	CloseStdin() error
	// Wait returns once the process exited.
	Wait() error
	// Kill kills the process and what it started (its process group).
	Kill()
	// Close closes the daemon's ends of the pipes: a read or write
	// blocked on them returns (a child that escaped the group may hold
	// the other ends). After Wait.
	Close()
}

// Starter starts a plugin (execStart; tests start fakes in-process).
type Starter func(ctx context.Context, s Spec) (Process, error)

// execStart runs s.Command in its own process group with pipes for its
// stdin, stdout and stderr.
func execStart(_ context.Context, s Spec) (Process, error) {
	cmd := exec.Command(s.Command, s.Args...)
	cmd.Env = s.Env
	cmd.Dir = s.Dir
	setProcAttrs(cmd)
	var ends []*os.File
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			ends = append(ends, r, w)
		}
		return r, w, err
	}
	closeAll := func() {
		for _, f := range ends {
			f.Close()
		}
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	// The child has its copies.
	inR.Close()
	outW.Close()
	errW.Close()
	return &execProcess{cmd: cmd, stdin: inW, stdout: outR, stderr: errR}, nil
}

type execProcess struct {
	cmd                   *exec.Cmd
	stdin, stdout, stderr *os.File
	closeIn               sync.Once
}

func (p *execProcess) Stdin() io.Writer  { return p.stdin }
func (p *execProcess) Stdout() io.Reader { return p.stdout }
func (p *execProcess) Stderr() io.Reader { return p.stderr }

func (p *execProcess) CloseStdin() error {
	var err error
	p.closeIn.Do(func() { err = p.stdin.Close() })
	return err
}

func (p *execProcess) Wait() error { return p.cmd.Wait() }

func (p *execProcess) Kill() {
	killGroup(p.cmd.Process.Pid)
	_ = p.cmd.Process.Kill()
}

func (p *execProcess) Close() {
	_ = p.CloseStdin()
	p.stdout.Close()
	p.stderr.Close()
}
