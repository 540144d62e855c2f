package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one control-plane component running in its own process group,
// so an interrupt aimed at the harness does not reach it before the harness
// has decided the order of shutdown.
type process struct {
	name    string
	binary  string
	args    []string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

func startProcess(name, binary, logPath string, args []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If the harness dies without cleaning up (a panic, SIGKILL), the
		// kernel takes the component down with it.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, binary, err)
	}
	p := &process{name: name, binary: binary, args: args, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, fmt.Errorf("%s exited: %v; last log lines:\n%s", p.name, p.err, tail(p.logPath, 20))
	default:
		return false, nil
	}
}

// stop asks the process group to terminate and kills it after grace.
func (p *process) stop(grace time.Duration) {
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
}

// tail returns the last n lines of a file, or a note why it cannot.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", filepath.Base(path), err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// watchdog is a tiny shell process that outlives a harness killed by a panic
// or a signal: once the harness's pid is gone it kills every component still
// listed in pidsFile, prints the tail of their logs, and removes dir.
func startWatchdog(dir, pidsFile string, removeDir bool) (*exec.Cmd, error) {
	script := `
parent=$1; dir=$2; pids=$3; remove=$4
while kill -0 "$parent" 2>/dev/null; do sleep 0.5; done
if [ -f "$pids" ]; then
	while read -r pid; do kill -9 -"$pid" 2>/dev/null; done < "$pids"
fi
for log in "$dir"/*.log; do
	[ -f "$log" ] || continue
	echo "--- control plane: last lines of $(basename "$log") (harness died) ---" >&2
	tail -n 20 "$log" >&2
done
if [ "$remove" = yes ]; then rm -rf "$dir"; fi
`
	remove := "no"
	if removeDir {
		remove = "yes"
	}
	cmd := exec.Command("/bin/sh", "-c", script, "watchdog", fmt.Sprint(os.Getpid()), dir, pidsFile, remove)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start watchdog: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd, nil
}

func stopWatchdog(cmd *exec.Cmd) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop watchdog: %w", err)
	}
	return nil
}
