package gitcmd

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// Run runs git with args in the working directory and returns what it
// printed on standard output. A failure names the command and carries
// git's standard error.
func Run(args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command("git", args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
