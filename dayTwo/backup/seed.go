package backup

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Seed puts a fresh dump of src into dataDir, where a server starting
// there loads it: the upgrade pre-check's copy of the cluster's data. The
// dump comes by the backup stream (Take: SYNC, as a replica would) and is
// installed as a restore installs one (dump.rdb, and appendonly.aof for a
// server with appendonly on). dataDir must be empty: the pre-check pod's
// own folder, never a cluster pod's.
func Seed(ctx context.Context, src Source, dataDir string) (Result, error) {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return Result{}, err
	}
	if len(entries) > 0 {
		return Result{}, fmt.Errorf("%s is not empty: a pre-check copy goes only into an empty folder", dataDir)
	}
	tmp, err := os.CreateTemp(dataDir, ".seed-*")
	if err != nil {
		return Result{}, err
	}
	defer os.Remove(tmp.Name())
	res, err := Take(ctx, src, func(_ context.Context, r io.Reader, _ int64) error {
		if _, err := io.Copy(tmp, r); err != nil {
			return err
		}
		return tmp.Sync()
	})
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, err
	}
	return res, install(tmp.Name(), dataDir, "seed\n"+res.Checksum+"\n\n")
}

// SeedReport is what a pre-check copy held, as the seed init container
// reports it in its termination message (the one line Format writes).
type SeedReport struct {
	// Keys and ExpiringKeys count the dump's first database, DB; -1 when
	// the dump's header could not be read.
	Keys, ExpiringKeys int64
	DB                 int
	RDBVersion         int
	Size               int64
	Source             string
}

// SeedReportOf describes a seed's result.
func SeedReportOf(res Result, source string) SeedReport {
	return SeedReport{Keys: res.Header.Keys, ExpiringKeys: res.Header.ExpiringKeys, DB: int(res.Header.DB), RDBVersion: res.Header.RDBVersion, Size: res.Size, Source: source}
}

// Format is the report as one line of key=value fields.
func (r SeedReport) Format() string {
	return fmt.Sprintf("keys=%d expiring=%d db=%d rdb=%d size=%d source=%s", r.Keys, r.ExpiringKeys, r.DB, r.RDBVersion, r.Size, r.Source)
}

// ParseSeedReport reads what Format wrote.
func ParseSeedReport(s string) (SeedReport, error) {
	r := SeedReport{}
	seen := 0
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		var err error
		switch k {
		case "keys":
			r.Keys, err = strconv.ParseInt(v, 10, 64)
		case "expiring":
			r.ExpiringKeys, err = strconv.ParseInt(v, 10, 64)
		case "db":
			r.DB, err = strconv.Atoi(v)
		case "rdb":
			r.RDBVersion, err = strconv.Atoi(v)
		case "size":
			r.Size, err = strconv.ParseInt(v, 10, 64)
		case "source":
			r.Source = v
		default:
			continue
		}
		if err != nil {
			return SeedReport{}, fmt.Errorf("seed report %q: field %s: %w", s, k, err)
		}
		seen++
	}
	if seen < 6 {
		return SeedReport{}, fmt.Errorf("seed report %q lacks fields", s)
	}
	return r, nil
}
