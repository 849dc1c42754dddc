package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	"github.com/cacheops/cacheops/renderer"
)

func recommend(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("recommend", flag.ContinueOnError)
	var lf liveFlags
	lf.register(fs)
	repo := fs.String("repo", "", "a git checkout of the manifests")
	path := fs.String("path", "", "the manifest holding the CacheCluster, relative to --repo")
	branch := fs.String("branch", "", "the branch to commit on (default: cacheops/recommend-NAMESPACE-NAME-TIME)")
	from := fs.String("from", "", "read the CacheCluster (with its status) from this file instead of the cluster, e.g. kubectl get cc NAME -o yaml")
	name, err := parseNameFirst(fs, args)
	if err != nil {
		return err
	}
	if *repo == "" || *path == "" {
		return errors.New("recommend needs --repo DIR and --path FILE")
	}
	cc := &cachev1alpha1.CacheCluster{}
	if *from != "" {
		data, err := os.ReadFile(*from)
		if err != nil {
			return err
		}
		if err := yaml.Unmarshal(data, cc); err != nil {
			return fmt.Errorf("%s: %w", *from, err)
		}
	} else {
		var err error
		if _, cc, err = lf.get(name); err != nil {
			return err
		}
	}
	if len(cc.Status.Recommendations) == 0 {
		fmt.Fprintf(stdout, "CacheCluster %s/%s has no recommendation; nothing to do\n", cc.Namespace, name)
		return nil
	}
	if *branch == "" {
		*branch = fmt.Sprintf("cacheops/recommend-%s-%s-%s", cc.Namespace, name, time.Now().UTC().Format("20060102-150405"))
	}
	commit, err := commitRecommendations(*repo, *path, cc.Namespace, name, cc.Status.Recommendations, *branch)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "committed %s on branch %s in %s; push it and open a pull request:\n  git -C %s push -u origin %s\n", commit[:12], *branch, *repo, *repo, *branch)
	return nil
}

// commitRecommendations writes the recommendations into the CacheCluster's
// manifest, keeping its comments and layout, and commits the change on a
// new branch with the evidence in the message.
func commitRecommendations(repo, path, namespace, name string, recs []cachev1alpha1.Recommendation, branch string) (string, error) {
	file := filepath.Join(repo, path)
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	out, applied, err := editManifest(data, namespace, name, recs)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(applied) == 0 {
		return "", fmt.Errorf("%s: the manifest already holds every recommended value", path)
	}
	if err := os.WriteFile(file, out, 0o644); err != nil {
		return "", err
	}
	g := func(args ...string) (string, error) { return git(append([]string{"-C", repo}, args...)...) }
	if _, err := g("checkout", "-b", branch); err != nil {
		return "", err
	}
	if _, err := g("add", path); err != nil {
		return "", err
	}
	var title []string
	var body strings.Builder
	for _, r := range applied {
		title = append(title, fmt.Sprintf("%s %s→%s", strings.TrimPrefix(r.Field, "spec."), r.Current, r.Recommended))
		fmt.Fprintf(&body, "%s: %s → %s\n  Evidence: %s (since %s).\n", r.Field, r.Current, r.Recommended, r.Reason, r.Since.UTC().Format(time.RFC3339))
	}
	msg := fmt.Sprintf("cacheops: %s/%s: %s\n\n%s\nRecommended by the cacheops operator (status.recommendations of CacheCluster %s/%s);\nwritten by kubectl cache recommend. Review, then merge to apply through GitOps.\n",
		namespace, name, strings.Join(title, ", "), body.String(), namespace, name)
	// Only this file, whatever else is staged in the checkout.
	args := []string{"commit", "-q", "-m", msg, "--", path}
	if who, _ := g("config", "user.name"); strings.TrimSpace(who) == "" {
		args = append([]string{"-c", "user.name=kubectl-cache", "-c", "user.email=kubectl-cache@localhost"}, args...)
	}
	if _, err := g(args...); err != nil {
		return "", err
	}
	sha, err := g("rev-parse", "HEAD")
	return strings.TrimSpace(sha), err
}

// editManifest sets the recommended values in the CacheCluster's document
// of a multi-document YAML file. yaml.v3's node tree keeps comments, key
// order and quoting; only the changed values differ.
func editManifest(data []byte, namespace, name string, recs []cachev1alpha1.Recommendation) ([]byte, []cachev1alpha1.Recommendation, error) {
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	var docs []*yaml3.Node
	for {
		var n yaml3.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, nil, err
		}
		docs = append(docs, &n)
	}
	var target *yaml3.Node
	for _, d := range docs {
		if len(d.Content) == 0 {
			continue
		}
		root := d.Content[0]
		if scalar(lookup(root, "kind")) != "CacheCluster" || scalar(lookup(root, "metadata", "name")) != name {
			continue
		}
		if ns := scalar(lookup(root, "metadata", "namespace")); ns != "" && namespace != "" && ns != namespace {
			continue
		}
		target = root
	}
	if target == nil {
		return nil, nil, fmt.Errorf("no CacheCluster %s in it", name)
	}
	var applied []cachev1alpha1.Recommendation
	for _, r := range recs {
		keys := strings.Split(strings.TrimPrefix(r.Field, "spec."), ".")
		node := ensure(target, append([]string{"spec"}, keys...)...)
		if renderer.SameParam(node.Value, r.Recommended) {
			continue
		}
		if node.Kind != yaml3.ScalarNode || !renderer.SameParam(node.Value, r.Current) {
			// The manifest moved on since the evidence was gathered.
			return nil, nil, fmt.Errorf("%s is %q in the manifest but the recommendation was made for %q: it is stale, wait for a new one", r.Field, node.Value, r.Current)
		}
		node.Kind, node.Tag, node.Value, node.Style = yaml3.ScalarNode, "!!str", r.Recommended, 0
		note := "raised from " + r.Current + " by kubectl cache recommend"
		if node.LineComment != "" {
			node.LineComment += "; " + note
		} else {
			node.LineComment = "# " + note
		}
		applied = append(applied, r)
	}
	var buf bytes.Buffer
	enc := yaml3.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), applied, nil
}

func lookup(n *yaml3.Node, keys ...string) *yaml3.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml3.MappingNode {
			return nil
		}
		var next *yaml3.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

func scalar(n *yaml3.Node) string {
	if n == nil {
		return ""
	}
	return n.Value
}

// ensure returns the value node at keys, creating mappings on the way.
func ensure(n *yaml3.Node, keys ...string) *yaml3.Node {
	for _, k := range keys {
		next := lookup(n, k)
		if next == nil {
			next = &yaml3.Node{Kind: yaml3.MappingNode, Tag: "!!map"}
			n.Content = append(n.Content, &yaml3.Node{Kind: yaml3.ScalarNode, Tag: "!!str", Value: k}, next)
		}
		n = next
	}
	return n
}
