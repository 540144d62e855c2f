package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildOperator builds ../../cmd/operator (a test package's view of the
// repository) into a temporary directory, for the end-to-end packages to
// run as a real process. remove deletes the directory.
func BuildOperator() (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "osop-operator-bin-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { _ = os.RemoveAll(dir) }
	path = filepath.Join(dir, "operator")
	build := exec.Command("go", "build", "-o", path, "../../cmd/operator")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		remove()
		return "", nil, fmt.Errorf("build operator: %w", err)
	}
	return path, remove, nil
}
