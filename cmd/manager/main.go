// Command manager runs the cacheops operator: the day-one controller that
// renders and applies each CacheCluster's objects, and the day-two
// controller that manages replication roles and failover, with metrics,
// health probes and leader election.
//
// `manager restore ...` is the init container of a cluster created with
// spec.restore: it downloads the dump into the data directory.
// `manager precheck-seed ...` is the init container of an upgrade's
// pre-check pod: it copies a cluster pod's current data into the pod's
// empty data folder.
// `manager backup-store ...` serves a PersistentVolumeClaim backup target
// to the operator (the pod of StatefulSet <cluster>-backup-store).
package main

import (
	"flag"
	"os"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/cacheops/cacheops/api/v1alpha1"
	daytwo "github.com/cacheops/cacheops/dayTwo"
	"github.com/cacheops/cacheops/dayTwo/backup"
	"github.com/cacheops/cacheops/dayTwo/plan"
	"github.com/cacheops/cacheops/renderer"
	"github.com/cacheops/cacheops/renderer/controller"
)

func main() {
	subcommands := map[string]func([]string) int{"restore": restore, "precheck-seed": precheckSeed, "backup-store": backupStore}
	if len(os.Args) > 1 {
		if run, ok := subcommands[os.Args[1]]; ok {
			os.Exit(run(os.Args[2:]))
		}
	}
	var (
		metricsAddr     string
		probeAddr       string
		pprofAddr       string
		leaderElect     bool
		leaderNamespace string
		namespaces      string
		recreateAfter   time.Duration
		stepDeadline    time.Duration
		backupStall     time.Duration
		recommendAfter  time.Duration
		majorityDown    time.Duration
		exitAfterStep   string
		dayOneWorkers   int
		dayTwoWorkers   int
		caDuration      time.Duration
	)
	flag.StringVar(&renderer.RestoreImage, "restore-image", renderer.RestoreImage, "Image of the init container that downloads a backup into a restored cluster's pods: the operator's own image (its manager binary runs `manager restore`).")
	flag.StringVar(&renderer.Operator.Namespace, "operator-namespace", renderer.Operator.Namespace, "Namespace the manager's pods run in: the clusters' NetworkPolicies admit the operator's pods from it (the install chart passes its release namespace).")
	var operatorPodLabels string
	flag.StringVar(&operatorPodLabels, "operator-pod-labels", labels.Set(renderer.Operator.PodLabels).String(), "Labels of the manager's pods (k=v,k=v): the clusters' NetworkPolicies admit the pods that carry all of them in --operator-namespace (the install chart passes its manager's selector labels).")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 turns it off.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "Address of the net/http/pprof endpoints (/debug/pprof/...); empty turns them off. For profiling only: never expose it.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader through a Lease so only one replica reconciles.")
	flag.StringVar(&leaderNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the namespace the manager runs in).")
	flag.StringVar(&namespaces, "watch-namespaces", "", "Comma-separated namespaces to watch; empty watches all.")
	flag.DurationVar(&recommendAfter, "recommend-after", 5*time.Minute, "How long memory pressure (used_memory above 80% of maxmemory on the master) must last before day-two recommends a larger maxmemory in status.recommendations.")
	flag.DurationVar(&backupStall, "backup-stall-timeout", backup.DefaultStallTimeout, "How long a backup attempt may make no progress (no byte of the dump and, before the dump starts, no key more written by the source's snapshot for it) before it is aborted and retried, from another in-sync replica if there is one.")
	flag.DurationVar(&stepDeadline, "upgrade-step-deadline", 5*time.Minute, "How long an upgrade's pre-check pod, and each restarted pod, may take to become ready and in sync before the upgrade is refused or rolled back.")
	flag.DurationVar(&recreateAfter, "recreate-not-ready-after", 0, "Recreate a replica pod that stays not-Ready this long (0: max(5m, 60 x the cluster's probe timeout)).")
	flag.DurationVar(&majorityDown, "majority-down-after", controller.MajorityDownAfter, "Report a cluster with more than half of its pods down this long as Failed.")
	flag.IntVar(&dayOneWorkers, "dayone-workers", controller.DefaultWorkers, "How many CacheClusters the day-one controller (render and apply) reconciles at once.")
	flag.IntVar(&dayTwoWorkers, "daytwo-workers", daytwo.DefaultWorkers, "How many CacheClusters the day-two controller (roles, failover, operations) reconciles at once. Clusters whose master does not answer go first.")
	flag.DurationVar(&caDuration, "tls-ca-duration", controller.DefaultCADuration, "Lifetime of the CA the operator keeps for each cluster with spec.tls and no issuer (at least 4 certificate lifetimes; it is replaced before it can no longer sign a whole one).")
	flag.StringVar(&renderer.ClusterDomain, "cluster-domain", renderer.ClusterDomain, "DNS domain of the Kubernetes cluster, for the names in the clusters' TLS certificates.")
	flag.StringVar(&exitAfterStep, "fault-exit-after-step", "", "Fault injection for tests only: exit with status 3 right after the first day-two step of this kind (e.g. Promote), as a crash in the middle of an operation would.")
	opts := zap.Options{Development: false, TimeEncoder: zapcore.ISO8601TimeEncoder}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	podLabels, err := labels.ConvertSelectorToLabelsMap(operatorPodLabels)
	if err != nil || len(podLabels) == 0 || renderer.Operator.Namespace == "" {
		ctrl.Log.Error(err, "Invalid --operator-namespace or --operator-pod-labels: the namespace and at least one label k=v are needed", "namespace", renderer.Operator.Namespace, "labels", operatorPodLabels)
		os.Exit(2)
	}
	renderer.Operator.PodLabels = podLabels
	controller.MajorityDownAfter = majorityDown
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		log.Error(err, "Cannot build scheme")
		os.Exit(1)
	}
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		log.Error(err, "Cannot build scheme")
		os.Exit(1)
	}

	cacheOpts := controller.CacheOptions()
	if namespaces != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range strings.Split(namespaces, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				cacheOpts.DefaultNamespaces[ns] = cache.Config{}
			}
		}
	}

	cfg := ctrl.GetConfigOrDie()
	countRequests(cfg)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "cacheops.cache.cacheops.io",
		LeaderElectionNamespace: leaderNamespace,
		// The new leader starts at once when the old one stops cleanly.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "Cannot create manager")
		os.Exit(1)
	}
	if err := (&controller.Reconciler{Workers: dayOneWorkers, TLSCADuration: caDuration}).SetupWithManager(mgr); err != nil {
		log.Error(err, "Cannot set up controller", "controller", controller.ControllerName)
		os.Exit(1)
	}
	dayTwo := &daytwo.Reconciler{Namespaces: cacheOpts.DefaultNamespaces, Workers: dayTwoWorkers, RecreateAfter: recreateAfter, StepDeadline: stepDeadline, RecommendAfter: recommendAfter, BackupStallTimeout: backupStall}
	if exitAfterStep != "" {
		dayTwo.AfterStep = func(a plan.Action) {
			if string(a.Type) == exitAfterStep {
				log.Info("Exiting after this step, as --fault-exit-after-step asks", "action", a.String())
				os.Exit(3)
			}
		}
	}
	if err := dayTwo.SetupWithManager(mgr); err != nil {
		log.Error(err, "Cannot set up controller", "controller", daytwo.ControllerName)
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Cannot add health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "Cannot add ready check")
		os.Exit(1)
	}
	log.Info("Starting manager", "metrics", metricsAddr, "probes", probeAddr, "leaderElection", leaderElect, "namespaces", namespaces)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
}
