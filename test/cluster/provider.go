package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// provider runs the pods of one node as local processes. It implements
// virtual-kubelet's PodLifecycleHandler and PodNotifier: virtual-kubelet
// hands it pods and writes the statuses it reports to the API server.
type provider struct {
	node       string
	zone       string
	dir        string
	logDir     string
	images     []Image
	net        *network
	client     kubernetes.Interface
	secrets    corev1listers.SecretLister
	configMaps corev1listers.ConfigMapLister
	podLister  corev1listers.PodLister
	// halted: stopAll ran (the machine lost power); resync starts
	// nothing any more.
	halted bool
	env    *envResolver
	// api lets pods reach the API server (nil: they cannot).
	api *apiAccess

	mu     sync.Mutex
	pods   map[string]*podRuntime
	notify func(*corev1.Pod)
}

func podKey(ns, name string) string { return ns + "/" + name }

// podRuntime is one pod on this node.
type podRuntime struct {
	p        *provider
	pod      *corev1.Pod // as received; its Status is ours
	dir      string
	net      *podNetwork
	vols     *volumeSet
	ctx      context.Context
	cancel   context.CancelFunc
	deleting bool
	// initDone is true once every init container succeeded.
	initDone bool
	// tokenDir holds the service account token, when the pod mounts one.
	tokenDir string
	podErr   string // a pod-level problem shown in the status

	containers []*containerRuntime
	inits      []*containerRuntime
	done       chan struct{} // closed when every process has exited for good
	lastSent   *corev1.PodStatus
	// staleChecks counts resync ticks in a row at which the API server
	// held a different status than ours.
	staleChecks int
	// successor is the UID of the pod waiting to start under this pod's
	// name once it stopped.
	successor types.UID
}

// containerRuntime is one container: the process of its current run and
// what the status needs.
type containerRuntime struct {
	spec     corev1.Container
	init     bool
	cmd      *exec.Cmd
	pid      int
	restarts int32
	state    corev1.ContainerState
	last     corev1.ContainerState
	ready    bool
	started  bool
	exited   chan struct{} // closed when the current process exits
	logPath  string
	program  string
	args     []string
	env      []string
	image    Image
}

func (p *provider) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = cb
	p.mu.Unlock()
}

// CreatePod starts a pod in the background; its status tells how it goes.
func (p *provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	if p.halted {
		// The machine lost power (stopAll): nothing starts any more.
		p.mu.Unlock()
		return nil
	}
	key := podKey(pod.Namespace, pod.Name)
	if old, ok := p.pods[key]; ok {
		stopping, oldPod := old.deleting, old.snapshot()
		p.mu.Unlock()
		if oldPod.UID != pod.UID {
			if !stopping {
				// The predecessor is gone from the API server without
				// this node being told to stop it (virtual-kubelet
				// removed it, or its deletion was missed): stop it now,
				// or its successor would wait for it forever.
				log.L.Infof("pod %s: %s replaces %s, which still runs here; stopping it", key, pod.UID, oldPod.UID)
				_ = p.DeletePod(context.Background(), oldPod)
			}
			p.createAfter(old, pod)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	id := strings.ReplaceAll(string(pod.UID), "-", "")
	if len(id) > 10 {
		id = id[:10]
	}
	r := &podRuntime{
		p: p, pod: pod.DeepCopy(), ctx: ctx, cancel: cancel, done: make(chan struct{}),
		dir: filepath.Join(p.dir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, id)),
	}
	now := metav1.Now()
	r.pod.Status = corev1.PodStatus{Phase: corev1.PodPending, StartTime: &now, HostIP: p.net.Gateway(), HostIPs: []corev1.HostIP{{IP: p.net.Gateway()}}}
	for _, c := range pod.Spec.InitContainers {
		r.inits = append(r.inits, &containerRuntime{spec: c, init: true, state: waiting("PodInitializing", "")})
	}
	for _, c := range pod.Spec.Containers {
		r.containers = append(r.containers, &containerRuntime{spec: c, state: waiting("ContainerCreating", "")})
	}
	p.pods[key] = r
	p.mu.Unlock()

	go r.run(id)
	return nil
}

// UpdatePod takes a new spec; containers keep running (the kubelet would
// restart a container whose image changed, which StatefulSets never do in
// place).
func (p *provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	r, ok := p.pods[podKey(pod.Namespace, pod.Name)]
	if ok && r.pod.UID != pod.UID {
		// A pod recreated under the same name (a StatefulSet's) while its
		// predecessor still stops: virtual-kubelet takes it for an update.
		p.mu.Unlock()
		p.createAfter(r, pod)
		return nil
	}
	defer p.mu.Unlock()
	if ok {
		st := r.pod.Status
		r.pod = pod.DeepCopy()
		r.pod.Status = st
	}
	return nil
}

// createAfter starts pod once old, its predecessor under the same name, has
// stopped and released its network and folders: two processes never share
// a data folder.
func (p *provider) createAfter(old *podRuntime, pod *corev1.Pod) {
	pod = pod.DeepCopy()
	p.mu.Lock()
	if old.successor == pod.UID {
		p.mu.Unlock()
		return
	}
	old.successor = pod.UID
	p.mu.Unlock()
	go func() {
		<-old.done
		key := podKey(pod.Namespace, pod.Name)
		for {
			p.mu.Lock()
			cur, ok := p.pods[key]
			p.mu.Unlock()
			if !ok || cur != old {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if lister := p.podLister; lister != nil {
			if live, err := lister.Pods(pod.Namespace).Get(pod.Name); err != nil || live.UID != pod.UID || !live.DeletionTimestamp.IsZero() {
				return
			}
		}
		_ = p.CreatePod(context.Background(), pod)
	}()
}

// DeletePod stops a pod: SIGTERM, SIGKILL after the grace period, then the
// pod's network and folders go, and the pod object is removed.
func (p *provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	r, ok := p.pods[podKey(pod.Namespace, pod.Name)]
	if !ok {
		p.mu.Unlock()
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	if r.deleting {
		p.mu.Unlock()
		return nil
	}
	r.deleting = true
	r.pod.DeletionTimestamp = pod.DeletionTimestamp
	r.pod.DeletionGracePeriodSeconds = pod.DeletionGracePeriodSeconds
	grace := 30 * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	p.mu.Unlock()

	go func() {
		r.stop(grace)
		p.forget(r)
		// As the kubelet does: once nothing runs, remove the object now
		// instead of waiting out the grace period.
		zero := int64(0)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions(string(pod.UID)),
		})
	}()
	return nil
}

// forget drops a stopped pod and its resources (not its PVC data).
func (p *provider) forget(r *podRuntime) {
	if r.net != nil {
		p.net.teardown(r.net)
	}
	_ = os.RemoveAll(r.dir)
	p.mu.Lock()
	if cur := p.pods[podKey(r.pod.Namespace, r.pod.Name)]; cur == r {
		delete(p.pods, podKey(r.pod.Namespace, r.pod.Name))
	}
	p.mu.Unlock()
}

// GetPod returns the pod this node runs under that name. A runtime whose
// pod the API server no longer holds (a StatefulSet recreated the pod
// under the same name while this one stops) is not that pod: virtual-kubelet
// compares what GetPod returns with the new pod without its UID, and would
// take the new pod for one that already runs and never create it.
func (p *provider) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	r, ok := p.pods[podKey(ns, name)]
	var pod *corev1.Pod
	if ok {
		pod = r.snapshot()
	}
	lister := p.podLister
	p.mu.Unlock()
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", ns, name)
	}
	if lister != nil {
		if live, err := lister.Pods(ns).Get(name); err == nil && live.UID != pod.UID {
			return nil, errdefs.NotFoundf("pod %s/%s on this node is %s, a predecessor of %s", ns, name, pod.UID, live.UID)
		}
	}
	return pod, nil
}

func (p *provider) GetPodStatus(ctx context.Context, ns, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, r := range p.pods {
		out = append(out, r.snapshot())
	}
	return out, nil
}

// stopAll kills every process at once, as a machine that loses power would.
func (p *provider) stopAll() {
	p.mu.Lock()
	p.halted = true
	pods := make([]*podRuntime, 0, len(p.pods))
	for _, r := range p.pods {
		r.deleting = true
		pods = append(pods, r)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.stop(0)
			p.forget(r)
		}()
	}
	wg.Wait()
}

// run brings a pod up: network, volumes, init containers, containers.
func (r *podRuntime) run(id string) {
	p := r.p
	defer close(r.done)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		r.fail(fmt.Sprintf("creating pod folder: %v", err))
		return
	}
	pn, err := p.net.setup(id)
	if err != nil {
		r.fail(fmt.Sprintf("pod network: %v", err))
		return
	}
	p.mu.Lock()
	r.net = pn
	r.pod.Status.PodIP = pn.ip.String()
	r.pod.Status.PodIPs = []corev1.PodIP{{IP: pn.ip.String()}}
	p.mu.Unlock()
	r.publish()
	if p.api != nil {
		if err := p.api.forward(r.ctx, pn.Path()); err != nil {
			r.fail(fmt.Sprintf("API server access: %v", err))
			return
		}
	}

	// Volumes may wait for a claim to bind or a Secret to appear.
	if !r.untilReady(func() error {
		vols, err := p.prepareVolumes(r.ctx, r.pod, r.dir)
		if err == nil {
			p.mu.Lock()
			r.vols = vols
			p.mu.Unlock()
		}
		return err
	}) {
		return
	}
	// A token, for pods that mount one; its account may not exist yet.
	if p.api != nil && mountsToken(r.pod) && !r.untilReady(func() error {
		dir := filepath.Join(r.dir, "serviceaccount")
		err := p.writeToken(r.ctx, r.pod, dir)
		if err == nil {
			p.mu.Lock()
			r.tokenDir = dir
			p.mu.Unlock()
		}
		return err
	}) {
		return
	}

	for _, c := range r.inits {
		if !r.supervise(c) {
			return
		}
	}
	p.mu.Lock()
	r.initDone = true
	p.mu.Unlock()
	r.publish()

	var wg sync.WaitGroup
	for _, c := range r.containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.supervise(c)
		}()
	}
	wg.Wait()
}

// untilReady runs step once a second until it succeeds, showing its error
// in the pod's status meanwhile; false when the pod stops first.
func (r *podRuntime) untilReady(step func() error) bool {
	for {
		err := step()
		r.p.mu.Lock()
		r.podErr = ""
		if err != nil {
			r.podErr = err.Error()
		}
		r.p.mu.Unlock()
		if err == nil {
			return true
		}
		r.publish()
		if !sleepCtx(r.ctx, time.Second) {
			return false
		}
	}
}

// fail records a pod-level problem.
func (r *podRuntime) fail(msg string) {
	r.p.mu.Lock()
	r.podErr = msg
	r.p.mu.Unlock()
	r.publish()
}

// supervise runs one container until it is done for good: restarts follow
// the pod's restartPolicy with an exponential back-off (1s doubling, at most
// 20s, reset after 10s of running). For an init container it returns true
// once the container succeeded.
func (r *podRuntime) supervise(c *containerRuntime) bool {
	p := r.p
	backoff := time.Second
	for {
		if r.ctx.Err() != nil {
			return false
		}
		err := r.startContainer(c)
		if err != nil {
			reason := "CreateContainerError"
			var ie errImage
			var ce errConfig
			switch {
			case errors.As(err, &ie):
				reason = "ErrImagePull"
			case errors.As(err, &ce):
				reason = "CreateContainerConfigError"
			}
			p.mu.Lock()
			c.state = waiting(reason, err.Error())
			p.mu.Unlock()
			r.publish()
			if !sleepCtx(r.ctx, backoff) {
				return false
			}
			backoff = min(backoff*2, 20*time.Second)
			continue
		}
		r.publish()
		startedAt := time.Now()
		probeCtx, stopProbes := context.WithCancel(r.ctx)
		if !c.init {
			go r.probe(probeCtx, c)
		}
		select {
		case <-c.exited:
		case <-r.ctx.Done():
			// The pod was stopped while this run was starting: stop saw
			// no running process to signal and ended the pod's context
			// (seen at 300 clusters: a pod stopped in the middle of a
			// restart kept its process and the cluster's Stop waited
			// for it forever). stop ends the context only after the
			// processes it saw have exited, so a run still going is
			// that one; a run stop saw has exited already (both cases
			// ready at once: select picks either) and its reaped pid
			// is not signalled.
			select {
			case <-c.exited:
			default:
				_ = syscall.Kill(-c.pid, syscall.SIGKILL)
				_ = syscall.Kill(-c.pid, syscall.SIGCONT)
				<-c.exited
			}
		}
		stopProbes()

		p.mu.Lock()
		code := c.state.Terminated.ExitCode
		deleting := r.deleting
		policy := r.pod.Spec.RestartPolicy
		p.mu.Unlock()
		r.publish()
		if deleting || r.ctx.Err() != nil {
			return false
		}
		if c.init && code == 0 {
			return true
		}
		if policy == corev1.RestartPolicyNever || (policy == corev1.RestartPolicyOnFailure && code == 0) {
			return code == 0
		}
		if time.Since(startedAt) > 10*time.Second {
			backoff = time.Second
		}
		p.mu.Lock()
		c.last = c.state
		c.restarts++
		c.state = waiting("CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container %s", backoff, c.spec.Name))
		p.mu.Unlock()
		r.publish()
		if !sleepCtx(r.ctx, backoff) {
			return false
		}
		backoff = min(backoff*2, 20*time.Second)
	}
}

// startContainer starts one run of a container through the pod init.
func (r *podRuntime) startContainer(c *containerRuntime) error {
	p := r.p
	im, err := resolveImage(p.images, c.spec.Image)
	if err != nil {
		return err
	}
	program, args, err := resolveCommand(im, c.spec.Image, c.spec.Command, c.spec.Args)
	if err != nil {
		return err
	}
	p.mu.Lock()
	pod := r.pod.DeepCopy()
	podIP := r.net.ip.String()
	p.mu.Unlock()
	env, err := p.env.resolve(pod, &c.spec, podIP, p.net.Gateway())
	if err != nil {
		return err
	}
	if p.api != nil {
		env = withDefaults(env, p.api.env())
	}
	args = expandArgs(args, env)

	spec := initSpec{NetNS: r.net.Path(), Hostname: pod.Name, Path: program, Args: args, Env: env, WorkDir: c.spec.WorkingDir}
	for _, m := range c.spec.VolumeMounts {
		src, ok := r.vols.dirs[m.Name]
		if !ok {
			return errConfig{fmt.Sprintf("volume mount %q names no volume", m.Name)}
		}
		if m.SubPath != "" {
			src = filepath.Join(src, filepath.Clean("/"+m.SubPath))
		}
		spec.Mounts = append(spec.Mounts, initMount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	messageFile := terminationMessageFile(c.spec, spec.Mounts)
	p.mu.Lock()
	tokenDir := r.tokenDir
	p.mu.Unlock()
	if tokenDir != "" {
		spec.Mounts = append(spec.Mounts, initMount{Source: tokenDir, Target: serviceAccountDir, ReadOnly: true})
	}
	uid, gid, groups := identity(pod, &c.spec)
	if uid == nil && im.User != nil {
		uid, gid = im.User, im.User
	}
	if nonRoot(pod, &c.spec) && (uid == nil || *uid == 0) {
		return errConfig{"container has runAsNonRoot and image will run as root"}
	}
	spec.UID, spec.GID, spec.Groups = uid, gid, groups
	if spec.WorkDir == "" {
		spec.WorkDir = "/"
	}

	specFile := filepath.Join(r.dir, "init-"+c.spec.Name+".json")
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := os.WriteFile(specFile, data, 0o600); err != nil {
		return err
	}
	logPath := podLogFile(p.logDir, pod.Namespace, pod.Name, c.spec.Name)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		logFile.Close()
		return err
	}
	cmd := &exec.Cmd{Path: self, Args: []string{podInitName, specFile}, Stdout: logFile, Stderr: logFile}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:      true,
		Unshareflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS,
		Pdeathsig:    syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", program, err)
	}
	exited := make(chan struct{})
	now := metav1.Now()
	p.mu.Lock()
	c.cmd, c.pid, c.exited = cmd, cmd.Process.Pid, exited
	c.program, c.args, c.env, c.image, c.logPath = program, args, env, im, logPath
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
	c.ready = false
	c.started = c.spec.StartupProbe == nil
	p.mu.Unlock()

	go func() {
		err := cmd.Wait()
		logFile.Close()
		code, reason := int32(0), "Completed"
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code, reason = 128+int32(ws.Signal()), "Error"
				if ws.Signal() == syscall.SIGKILL {
					reason = "OOMKilledOrKilled"
				}
			} else {
				code, reason = int32(ee.ExitCode()), "Error"
			}
		}
		p.mu.Lock()
		started := metav1.Now()
		if c.state.Running != nil {
			started = c.state.Running.StartedAt
		}
		c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: metav1.Now(),
			ContainerID: fmt.Sprintf("process://%d", c.pid), Message: readTerminationMessage(messageFile),
		}}
		if t := c.state.Terminated; t.Message == "" && code != 0 && c.spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
			t.Message = logTail(logPath)
		}
		c.ready = false
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

// terminationMessageFile is where, on this machine, a container's
// terminationMessagePath is written: the kubelet mounts a file of its own
// there; this node reads it only when the path lies in one of the
// container's writable volume mounts (the pre-check's seed container sets
// it so). Empty when the path is elsewhere (the default /dev/termination-log):
// such a container reports no message here.
func terminationMessageFile(c corev1.Container, mounts []initMount) string {
	path := filepath.Clean(c.TerminationMessagePath)
	file, deepest := "", ""
	for _, m := range mounts {
		// The innermost mount that holds the path (a longer target).
		t := filepath.Clean(m.Target)
		if m.ReadOnly || (path != t && !strings.HasPrefix(path, t+"/")) || len(t) <= len(deepest) {
			continue
		}
		file, deepest = filepath.Join(m.Source, strings.TrimPrefix(path, t)), t
	}
	return file
}

// readTerminationMessage reads at most 4096 bytes of a termination message
// file, as the kubelet does.
func readTerminationMessage(file string) string {
	if file == "" {
		return ""
	}
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	return string(b)
}

// logTail is what the kubelet reports for a failed container whose
// terminationMessagePolicy is FallbackToLogsOnError: the end of its log,
// at most 80 lines and 2048 bytes.
func logTail(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > 2048 {
		_, _ = f.Seek(fi.Size()-2048, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, 2048))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	return strings.Join(lines, "\n")
}

// identity is the user a container runs as: its securityContext, then the
// pod's. startContainer falls back to the image's USER, and refuses
// runAsNonRoot when that leaves root, as the kubelet does.
func identity(pod *corev1.Pod, c *corev1.Container) (uid, gid *int64, groups []int64) {
	if psc := pod.Spec.SecurityContext; psc != nil {
		uid, gid = psc.RunAsUser, psc.RunAsGroup
		groups = append(groups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			groups = append(groups, *psc.FSGroup)
		}
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsUser != nil {
			uid = csc.RunAsUser
		}
		if csc.RunAsGroup != nil {
			gid = csc.RunAsGroup
		}
	}
	if uid != nil && gid == nil {
		gid = uid
	}
	return uid, gid, groups
}

// nonRoot tells whether the container must not run as root.
func nonRoot(pod *corev1.Pod, c *corev1.Container) bool {
	if csc := c.SecurityContext; csc != nil && csc.RunAsNonRoot != nil {
		return *csc.RunAsNonRoot
	}
	psc := pod.Spec.SecurityContext
	return psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
}

// stop ends every process of the pod: SIGTERM, SIGKILL after grace.
func (r *podRuntime) stop(grace time.Duration) {
	r.p.mu.Lock()
	var running []*containerRuntime
	for _, c := range append(append([]*containerRuntime{}, r.inits...), r.containers...) {
		if c.cmd != nil && c.state.Running != nil {
			running = append(running, c)
		}
	}
	r.p.mu.Unlock()
	sig := syscall.SIGTERM
	if grace <= 0 {
		sig = syscall.SIGKILL
	}
	for _, c := range running {
		_ = syscall.Kill(-c.pid, sig)
		// A frozen process only acts on signals once thawed.
		_ = syscall.Kill(-c.pid, syscall.SIGCONT)
	}
	deadline := time.After(grace)
	for _, c := range running {
		select {
		case <-c.exited:
		case <-deadline:
			for _, k := range running {
				_ = syscall.Kill(-k.pid, syscall.SIGKILL)
			}
			<-c.exited
		}
	}
	r.cancel()
	<-r.done
	r.publish()
}

// snapshot is the pod with its current status. Callers hold p.mu.
func (r *podRuntime) snapshot() *corev1.Pod {
	pod := r.pod.DeepCopy()
	pod.Status = r.status()
	return pod
}

// status computes the pod status from the containers. Callers hold p.mu.
func (r *podRuntime) status() corev1.PodStatus {
	st := *r.pod.Status.DeepCopy()
	st.InitContainerStatuses = nil
	st.ContainerStatuses = nil
	now := metav1.Now()
	allReady, anyRunning, allDone, anyFailed := true, false, true, false
	for _, c := range r.inits {
		st.InitContainerStatuses = append(st.InitContainerStatuses, c.status(r.initDone))
	}
	for _, c := range r.containers {
		cs := c.status(false)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		if !cs.Ready {
			allReady = false
		}
		if c.state.Running != nil {
			anyRunning = true
		}
		if c.state.Terminated == nil {
			allDone = false
		} else if c.state.Terminated.ExitCode != 0 {
			anyFailed = true
		}
	}
	switch {
	case r.deleting && allDone:
		st.Phase = corev1.PodSucceeded
		if anyFailed {
			st.Phase = corev1.PodFailed
		}
	case r.pod.Spec.RestartPolicy != corev1.RestartPolicyAlways && allDone && r.initDone:
		st.Phase = corev1.PodSucceeded
		if anyFailed {
			st.Phase = corev1.PodFailed
		}
	case anyRunning || r.initDone:
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	st.Message, st.Reason = "", ""
	if r.podErr != "" {
		st.Message, st.Reason = r.podErr, "ProcessNodeError"
	}
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		c := corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now}
		for _, old := range r.pod.Status.Conditions {
			if old.Type == t && old.Status == s {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		return c
	}
	ready := allReady && anyRunning && !r.deleting
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodScheduled, true),
		cond(corev1.PodInitialized, r.initDone),
		cond(corev1.ContainersReady, ready),
		cond(corev1.PodReady, ready),
	}
	// Keep transition times stable between calls.
	r.pod.Status.Conditions = st.Conditions
	return st
}

func (c *containerRuntime) status(initDone bool) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{
		Name: c.spec.Name, Image: c.spec.Image, ImageID: "process://" + c.spec.Image,
		State: *c.state.DeepCopy(), LastTerminationState: *c.last.DeepCopy(),
		RestartCount: c.restarts, Ready: c.ready && c.state.Running != nil,
	}
	if c.pid != 0 {
		cs.ContainerID = fmt.Sprintf("process://%d", c.pid)
	}
	started := c.started && c.state.Running != nil
	cs.Started = &started
	if c.init && initDone && c.state.Terminated != nil {
		cs.Ready = true
	}
	return cs
}

// resync sets a pod's status right when the API server holds a different
// one, as the kubelet's status manager does: the node lifecycle controller
// marks pods NotReady while a node is unreachable, and a status update
// virtual-kubelet gave up on (after conflicts with label patches, or when a
// pod was recreated under the same name) is never retried, because
// virtual-kubelet drops a status equal to the last one it was handed. At the
// first mismatch the status is re-sent through virtual-kubelet; if it is
// still wrong a tick later, it is written directly.
func (p *provider) resync(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		pods := make([]*podRuntime, 0, len(p.pods))
		for _, r := range p.pods {
			pods = append(pods, r)
		}
		lister := p.podLister
		p.mu.Unlock()
		if lister == nil {
			continue
		}
		p.startMissed(lister)
		for _, r := range pods {
			live, err := lister.Pods(r.pod.Namespace).Get(r.pod.Name)
			if err == nil && live.UID != r.pod.UID && live.Spec.NodeName == p.node && live.DeletionTimestamp.IsZero() {
				// A successor never handed over: CreatePod stops this
				// one if nobody did and starts the successor once it has
				// stopped (nothing new when it already waits).
				_ = p.CreatePod(ctx, live)
			}
			if err != nil || live.UID != r.pod.UID {
				continue
			}
			p.mu.Lock()
			ours := r.status()
			deleting := r.deleting
			same := sameStatus(live.Status, ours)
			if same {
				r.staleChecks = 0
			} else {
				r.staleChecks++
			}
			stale := r.staleChecks
			p.mu.Unlock()
			switch {
			case same || deleting:
			case stale == 1:
				r.publishAlways()
			default:
				err := p.writeStatus(ctx, live, ours)
				log.L.Infof("resync: pod %s/%s status in the API differs from the node's for %d checks; written directly (error: %v)", live.Namespace, live.Name, stale, err)
			}
		}
	}
}

// startMissed creates the pods bound to this node that it does not run and
// that virtual-kubelet did not hand it (created more than missedAfter ago,
// not being deleted, not finished): a missed hand-over would leave them
// Pending for good.
func (p *provider) startMissed(lister corev1listers.PodLister) {
	p.mu.Lock()
	halted := p.halted
	p.mu.Unlock()
	if halted {
		return
	}
	live, err := lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, pod := range live {
		if pod.Spec.NodeName != p.node || !pod.DeletionTimestamp.IsZero() || time.Since(pod.CreationTimestamp.Time) < missedAfter ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		p.mu.Lock()
		_, ok := p.pods[podKey(pod.Namespace, pod.Name)]
		p.mu.Unlock()
		if !ok {
			log.L.Infof("resync: pod %s/%s (%s) is bound to %s but was never handed to it; creating it", pod.Namespace, pod.Name, pod.UID, p.node)
			_ = p.CreatePod(context.Background(), pod)
		}
	}
}

// missedAfter is how long a pod bound to this node may wait for
// virtual-kubelet to hand it over before resync creates it.
const missedAfter = 15 * time.Second

// writeStatus replaces the status of the live pod with ours, guarded by the
// live object's resourceVersion and UID.
func (p *provider) writeStatus(ctx context.Context, live *corev1.Pod, st corev1.PodStatus) error {
	pod := live.DeepCopy()
	pod.Status = st
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := p.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

// sameStatus compares what the kubelet is the authority on.
func sameStatus(a, b corev1.PodStatus) bool {
	if a.Phase != b.Phase || a.PodIP != b.PodIP || len(a.ContainerStatuses) != len(b.ContainerStatuses) {
		return false
	}
	cond := func(st corev1.PodStatus, t corev1.PodConditionType) corev1.ConditionStatus {
		for _, c := range st.Conditions {
			if c.Type == t {
				return c.Status
			}
		}
		return ""
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady, corev1.PodInitialized} {
		if cond(a, t) != cond(b, t) {
			return false
		}
	}
	for i := range a.ContainerStatuses {
		x, y := a.ContainerStatuses[i], b.ContainerStatuses[i]
		if x.Ready != y.Ready || x.RestartCount != y.RestartCount || (x.State.Running == nil) != (y.State.Running == nil) {
			return false
		}
	}
	return true
}

func (r *podRuntime) publishAlways() {
	r.p.mu.Lock()
	r.lastSent = nil
	r.p.mu.Unlock()
	r.publish()
}

// publish sends the pod's status to virtual-kubelet when it changed.
func (r *podRuntime) publish() {
	p := r.p
	p.mu.Lock()
	pod := r.snapshot()
	notify := p.notify
	changed := r.lastSent == nil || !equality.Semantic.DeepEqual(*r.lastSent, pod.Status)
	if changed {
		st := pod.Status
		r.lastSent = &st
	}
	p.mu.Unlock()
	if changed && notify != nil {
		start := time.Now()
		notify(pod)
		if took := time.Since(start); took > time.Second {
			log.L.Infof("pod %s/%s: handing the status to virtual-kubelet took %s", pod.Namespace, pod.Name, took.Round(time.Millisecond))
		}
	}
}

func waiting(reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
