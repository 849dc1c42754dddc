package plan

import (
	"fmt"
	"strings"
	"time"
)

// TLSState is spec.tls's certificate as day-two sees it: the one in the
// Secret the pods mount, and what each pod was last seen serving.
type TLSState struct {
	// Serial and NotAfter are the certificate of Secret <name>-tls.
	Serial   string
	NotAfter time.Time
	// Served is what each pod served when day-two last looked (a reload
	// or a check), by pod name.
	Served map[string]ServedCert
}

// ServedCert is the certificate a pod's server presented.
type ServedCert struct {
	// RunID is the server run (INFO run_id) it was seen in: a restarted
	// server read its files again and is looked at again.
	RunID    string
	Serial   string
	NotAfter time.Time
	// CheckedAt is when it was seen.
	CheckedAt time.Time
}

// TLSReloadRetry is how long day-two waits before it asks a pod again to
// read its certificate files when the last attempt found the old
// certificate in them: the kubelet updates a mounted Secret's files a
// while (up to about a minute) after the Secret changed.
const TLSReloadRetry = 5 * time.Second

// planTLS makes every reachable pod serve the certificate of the Secret:
// a pod whose current run has not been seen serving it is asked to read
// its files again (ActionReloadTLS: a look, and CONFIG SET tls-cert-file
// when it serves another). A pod that read them and still served the old
// one is asked again after TLSReloadRetry. It never waits: other rules go
// on while the kubelet catches up.
func planTLS(s Snapshot) Action {
	t := s.TLS
	if t == nil || t.Serial == "" {
		return Action{Type: ActionNone}
	}
	for _, p := range SortedPods(s) {
		if !Healthy(p) || p.Obs.RunID == "" {
			continue
		}
		seen, ok := t.Served[p.Name]
		switch {
		case ok && seen.RunID == p.Obs.RunID && seen.Serial == t.Serial:
			continue
		case ok && seen.RunID == p.Obs.RunID && s.Now.Sub(seen.CheckedAt) < TLSReloadRetry:
			continue
		case !ok || seen.RunID != p.Obs.RunID:
			return Action{Type: ActionReloadTLS, Pod: p.Name, Reason: "look at the certificate this run of " + p.Name + " serves"}
		}
		return Action{Type: ActionReloadTLS, Pod: p.Name, Reason: fmt.Sprintf("%s serves certificate %s, the Secret holds %s", p.Name, seen.Serial, t.Serial)}
	}
	return Action{Type: ActionNone}
}

// TLSPending are the reachable pods not yet seen serving the Secret's
// certificate in their current run, in ordinal order; nil without TLS.
func TLSPending(s Snapshot) []string {
	t := s.TLS
	if t == nil || t.Serial == "" {
		return nil
	}
	var out []string
	for _, p := range SortedPods(s) {
		if !Healthy(p) {
			continue
		}
		if seen, ok := t.Served[p.Name]; !ok || seen.RunID != p.Obs.RunID || seen.Serial != t.Serial {
			out = append(out, p.Name)
		}
	}
	return out
}

// TLSRecheck is how soon a reconcile that found nothing else to do should
// look again for a pod that waits to be asked again; zero when none does.
func TLSRecheck(s Snapshot) time.Duration {
	if len(TLSPending(s)) == 0 {
		return 0
	}
	return TLSReloadRetry
}

// TLSLoadedMessage says, for the CertificateLoaded condition, whether
// the pods serve the Secret's certificate: false while a reachable pod was
// seen serving another one in its current run. A pod not looked at yet in
// its run (just started: it read the files then) does not count. The
// message names pods and serials, never times, so it changes only when a
// pod's certificate does.
func TLSLoadedMessage(s Snapshot) (bool, string) {
	t := s.TLS
	var old []string
	for _, p := range SortedPods(s) {
		if !Healthy(p) {
			continue
		}
		if seen, ok := t.Served[p.Name]; ok && seen.RunID == p.Obs.RunID && seen.Serial != t.Serial {
			old = append(old, fmt.Sprintf("%s serves %s", p.Name, seen.Serial))
		}
	}
	if len(old) == 0 {
		return true, fmt.Sprintf("the pods serve certificate %s of Secret %s-tls, valid until %s", t.Serial, s.Name, t.NotAfter.UTC().Format(time.RFC3339))
	}
	return false, fmt.Sprintf("the pods do not all serve certificate %s of Secret %s-tls yet (%s): day-two makes each read its files again once the kubelet has updated them", t.Serial, s.Name, strings.Join(old, ", "))
}
