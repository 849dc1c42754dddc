package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

const (
	// StorageClassName is the default StorageClass of the cluster.
	StorageClassName = "local"
	// Provisioner is the name our provisioner answers to.
	Provisioner = "cacheops.io/local-dir"
)

// provisioner gives every claim of the "local" class a folder on this
// machine as a PersistentVolume bound to the node the pod was scheduled to
// (WaitForFirstConsumer), labelled with that node's zone, so data survives
// pod restarts and a pod follows its volume; a ReadWriteMany claim's volume
// may be mounted on any node. Released volumes are deleted with their
// folder.
type provisioner struct {
	client  kubernetes.Interface
	dir     string
	zones   map[string]string // node → zone
	kick    chan struct{}
	volumes corelisters.PersistentVolumeLister
}

// provisionAtOnce bounds the volumes created at the same time. One at a
// time, on an API server answering in 0.5 s under load (900 claims in the
// scale benchmark), the claims waited minutes for their volumes.
const provisionAtOnce = 8

func (c *Cluster) startProvisioner(ctx context.Context) error {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	del := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClassName, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       Provisioner,
		VolumeBindingMode: &wffc,
		ReclaimPolicy:     &del,
	}
	if _, err := c.client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating StorageClass %s: %w", StorageClassName, err)
	}
	p := &provisioner{client: c.client, dir: filepath.Join(c.opts.Dir, "volumes"), zones: map[string]string{}, kick: make(chan struct{}, 1)}
	for _, n := range c.opts.Nodes {
		p.zones[n.Name] = n.Zone
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(c.client, 0)
	pvcs := factory.Core().V1().PersistentVolumeClaims()
	pvs := factory.Core().V1().PersistentVolumes()
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.poke() },
		UpdateFunc: func(any, any) { p.poke() },
	}
	_, _ = pvcs.Informer().AddEventHandler(handler)
	_, _ = pvs.Informer().AddEventHandler(handler)
	p.volumes = pvs.Lister()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-p.kick:
			case <-tick.C:
			}
			claims, _ := pvcs.Lister().List(everything())
			var wg sync.WaitGroup
			slots := make(chan struct{}, provisionAtOnce)
			for _, pvc := range claims {
				if !p.wanted(pvc) {
					continue
				}
				slots <- struct{}{}
				wg.Go(func() {
					defer func() { <-slots }()
					p.provision(ctx, pvc)
				})
			}
			wg.Wait()
			vols, _ := pvs.Lister().List(everything())
			for _, pv := range vols {
				p.reclaim(ctx, pv)
			}
		}
	}()
	return nil
}

func (p *provisioner) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// wanted: a pending claim of our class on a node the scheduler picked,
// whose volume is not made yet as far as the informer knows
// (kube-controller-manager binds the two once it is; a volume created in
// the last pass and not seen yet is created again, refused as existing).
func (p *provisioner) wanted(pvc *corev1.PersistentVolumeClaim) bool {
	if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
		return false
	}
	if pvc.Annotations["volume.kubernetes.io/storage-provisioner"] != Provisioner {
		return false
	}
	if pvc.Annotations["volume.kubernetes.io/selected-node"] == "" {
		return false // the scheduler has not picked a node yet
	}
	_, err := p.volumes.Get("pvc-" + string(pvc.UID))
	return apierrors.IsNotFound(err)
}

func (p *provisioner) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim) {
	node := pvc.Annotations["volume.kubernetes.io/selected-node"]
	name := "pvc-" + string(pvc.UID)
	dir := filepath.Join(p.dir, name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return
	}
	labels := map[string]string{}
	terms := []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}
	if zone := p.zones[node]; zone != "" {
		labels[corev1.LabelTopologyZone] = zone
	}
	hostPathType := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": Provisioner},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              StorageClassName,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostPathType}},
		},
	}
	// Every node of this cluster is a process on one host, so the folder
	// is reachable from all of them; a ReadWriteMany claim gets a volume
	// any node may mount, like a network filesystem. Others are tied to
	// the node the scheduler chose, like a local disk.
	if slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		// No zone label either: the scheduler's VolumeZone check would
		// tie it to the zone's nodes.
		delete(pv.Labels, corev1.LabelTopologyZone)
	} else {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: terms}},
		}}
	}
	_, _ = p.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
}

func (p *provisioner) reclaim(ctx context.Context, pv *corev1.PersistentVolume) {
	if pv.Annotations["pv.kubernetes.io/provisioned-by"] != Provisioner || pv.Status.Phase != corev1.VolumeReleased {
		return
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.HostPath == nil {
		return
	}
	if filepath.Dir(pv.Spec.HostPath.Path) == p.dir {
		_ = os.RemoveAll(pv.Spec.HostPath.Path)
	}
	_ = p.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
}
