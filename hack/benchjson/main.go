// Command benchjson runs Go benchmarks and writes their figures as JSON.
// Sub-benchmarks named "baseline" are the reference of their siblings: for
// every BenchmarkX/variant next to BenchmarkX/baseline, the JSON carries the
// ratio variant/baseline of time and memory per operation, measured in the
// same run on the same machine.
//
//	go run ./hack/benchjson -out bench/results.json -- ./renderer/...
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

type result struct {
	Name        string  `json:"name"`
	Package     string  `json:"package"`
	Iterations  int64   `json:"iterations"`
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op,omitempty"`
	AllocsPerOp float64 `json:"allocs_per_op,omitempty"`
	// Metrics are the benchmark's own figures (b.ReportMetric), by unit.
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

type ratio struct {
	Benchmark   string  `json:"benchmark"`
	Variant     string  `json:"variant"`
	TimeRatio   float64 `json:"time_ratio,omitempty"`
	BytesRatio  float64 `json:"bytes_ratio,omitempty"`
	AllocsRatio float64 `json:"allocs_ratio,omitempty"`
	// MetricRatios are variant/baseline for every reported metric both have.
	MetricRatios map[string]float64 `json:"metric_ratios,omitempty"`
}

type report struct {
	Date    string   `json:"date"`
	GoVer   string   `json:"go"`
	CPUs    int      `json:"cpus"`
	Results []result `json:"results"`
	Ratios  []ratio  `json:"ratios"`
}

var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

func main() {
	out := flag.String("out", "bench/results.json", "file to write the JSON report to")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	tags := flag.String("tags", "", "go test -tags")
	timeout := flag.String("timeout", "", "go test -timeout (go test's default is 10m)")
	flag.Parse()
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = []string{"./..."}
	}

	args := []string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime", *benchtime}
	if *tags != "" {
		args = append(args, "-tags", *tags)
	}
	if *timeout != "" {
		args = append(args, "-timeout", *timeout)
	}
	args = append(args, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fail(err)
	}
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	rep := report{Date: time.Now().UTC().Format(time.RFC3339), GoVer: runtime.Version(), CPUs: runtime.NumCPU()}
	pkg := ""
	sc := bufio.NewScanner(io.TeeReader(stdout, os.Stdout))
	for sc.Scan() {
		text := sc.Text()
		if strings.HasPrefix(text, "pkg: ") {
			pkg = strings.TrimPrefix(text, "pkg: ")
		}
		m := line.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		r := result{Name: m[1], Package: pkg}
		r.Iterations, _ = strconv.ParseInt(m[2], 10, 64)
		// The rest is "value unit" pairs: ns/op, B/op, allocs/op and any
		// metric the benchmark reported itself.
		fields := strings.Fields(m[3])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			switch unit := fields[i+1]; unit {
			case "ns/op":
				r.NsPerOp = v
			case "B/op":
				r.BytesPerOp = v
			case "allocs/op":
				r.AllocsPerOp = v
			default:
				if r.Metrics == nil {
					r.Metrics = map[string]float64{}
				}
				r.Metrics[unit] = v
			}
		}
		rep.Results = append(rep.Results, r)
	}
	if err := cmd.Wait(); err != nil {
		fail(fmt.Errorf("go test: %w", err))
	}
	if len(rep.Results) == 0 {
		fail(fmt.Errorf("no benchmark ran"))
	}

	byName := map[string]result{}
	for _, r := range rep.Results {
		byName[r.Package+" "+r.Name] = r
	}
	for _, r := range rep.Results {
		parent, variant, ok := strings.Cut(r.Name, "/")
		if !ok || variant == "baseline" {
			continue
		}
		base, ok := byName[r.Package+" "+parent+"/baseline"]
		if !ok {
			continue
		}
		rt := ratio{Benchmark: parent, Variant: variant}
		if base.NsPerOp > 0 {
			rt.TimeRatio = r.NsPerOp / base.NsPerOp
		}
		for unit, v := range r.Metrics {
			if b, ok := base.Metrics[unit]; ok && b != 0 {
				if rt.MetricRatios == nil {
					rt.MetricRatios = map[string]float64{}
				}
				rt.MetricRatios[unit] = v / b
			}
		}
		if base.BytesPerOp > 0 {
			rt.BytesRatio = r.BytesPerOp / base.BytesPerOp
		}
		if base.AllocsPerOp > 0 {
			rt.AllocsRatio = r.AllocsPerOp / base.AllocsPerOp
		}
		rep.Ratios = append(rep.Ratios, rt)
	}
	sort.Slice(rep.Ratios, func(i, j int) bool {
		return rep.Ratios[i].Benchmark+rep.Ratios[i].Variant < rep.Ratios[j].Benchmark+rep.Ratios[j].Variant
	})

	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, append(data, '\n'), 0o644); err != nil {
		fail(err)
	}
	for _, rt := range rep.Ratios {
		fmt.Printf("ratio %s/%s vs baseline: time %.4f, bytes %.4f, allocs %.4f, metrics %v\n", rt.Benchmark, rt.Variant, rt.TimeRatio, rt.BytesRatio, rt.AllocsRatio, rt.MetricRatios)
	}
	fmt.Printf("wrote %s\n", *out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchjson:", err)
	os.Exit(1)
}
