package cluster

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// Image maps container images to programs on this machine. A pod whose image
// matches no entry does not start: its container waits with reason
// ErrImagePull and a message naming the image.
type Image struct {
	// Pattern matches the image reference with path.Match, e.g. "redis:*".
	Pattern string
	// Entrypoint is the program run when the container sets no command.
	Entrypoint string
	// Binaries maps the names a pod spec may use (a bare name or the base
	// name of an absolute path) to absolute paths here.
	Binaries map[string]string
	// User is the image's USER: the uid a container runs as when neither
	// it nor its pod sets runAsUser; root when nil.
	User *int64
}

// DefaultImages are the engine images the process-backed node can run,
// each mapped to the real binary of that version installed by
// hack/install-deps.sh: redis:7.0.15 runs Debian's redis-server 7.0.15
// (apt package redis-server), valkey/valkey:8.0.1 runs valkey-server 8.0.1
// (valkey-server from bookworm-backports). Any other tag fails with
// ErrImagePull, so a test never runs one binary under another version's
// name. Valkey images also answer to the redis-* names, as the real image
// does (Valkey installs redis-* links to its programs).
func DefaultImages() []Image {
	redis := programs("/usr/bin/", "redis")
	valkey := programs("/usr/bin/", "valkey")
	for k, v := range programs("/usr/bin/", "valkey") {
		valkey["redis"+strings.TrimPrefix(k, "valkey")] = v
	}
	return []Image{
		{Pattern: "redis:7.0.15", Entrypoint: "/usr/bin/redis-server", Binaries: redis},
		{Pattern: "docker.io/library/redis:7.0.15", Entrypoint: "/usr/bin/redis-server", Binaries: redis},
		{Pattern: "valkey/valkey:8.0.1", Entrypoint: "/usr/bin/valkey-server", Binaries: valkey},
		{Pattern: "docker.io/valkey/valkey:8.0.1", Entrypoint: "/usr/bin/valkey-server", Binaries: valkey},
	}
}

// programs maps the programs of an engine (prefix-server, prefix-cli, ...)
// to their paths under dir.
func programs(dir, prefix string) map[string]string {
	into := map[string]string{}
	for _, p := range []string{"-server", "-cli", "-sentinel", "-check-rdb", "-check-aof", "-benchmark"} {
		into[prefix+p] = dir + prefix + p
	}
	return into
}

// OperatorImagePattern matches the operator's image (charts/cacheops), which
// a restored cluster's init container runs.
const OperatorImagePattern = "ghcr.io/cacheops/cacheops-manager:*"

// OperatorImage runs the locally built manager binary for the operator's
// image, so `manager restore` init containers work on process-backed nodes.
func OperatorImage(manager string) Image {
	nonroot := int64(65532) // a distroless :nonroot image
	return Image{Pattern: OperatorImagePattern, Entrypoint: manager, Binaries: map[string]string{"manager": manager}, User: &nonroot}
}

// errImage is a container that cannot start because of its image.
type errImage struct{ msg string }

func (e errImage) Error() string { return e.msg }

// resolveImage finds the image entry of a reference.
func resolveImage(images []Image, ref string) (Image, error) {
	for _, im := range images {
		if ok, _ := path.Match(im.Pattern, ref); ok {
			return im, nil
		}
	}
	known := make([]string, 0, len(images))
	for _, im := range images {
		known = append(known, im.Pattern)
	}
	return Image{}, errImage{fmt.Sprintf("image %q has no local binary on this process-backed node (images it can run: %s)", ref, strings.Join(known, ", "))}
}

// resolveCommand turns a container's command and args into a program path
// and its arguments.
func resolveCommand(im Image, ref string, command, args []string) (string, []string, error) {
	if len(command) == 0 {
		if im.Entrypoint == "" {
			return "", nil, errImage{fmt.Sprintf("image %q has no entrypoint here; set the container's command", ref)}
		}
		return im.Entrypoint, args, nil
	}
	prog, err := resolveBinary(im, ref, command[0])
	if err != nil {
		return "", nil, err
	}
	return prog, append(append([]string{}, command[1:]...), args...), nil
}

func resolveBinary(im Image, ref, name string) (string, error) {
	if p, ok := im.Binaries[name]; ok {
		return p, nil
	}
	if p, ok := im.Binaries[filepath.Base(name)]; ok {
		return p, nil
	}
	return "", errImage{fmt.Sprintf("image %q provides no program %q on this process-backed node", ref, name)}
}
