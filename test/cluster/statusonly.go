package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// statusOnlyClient is the client virtual-kubelet runs with. Its pod status
// writes change the status alone, as a real kubelet's patch does.
// virtual-kubelet updates pods/status with the whole pod the provider last
// handed it, and the API server keeps the labels of a pods/status update:
// a status written right after an operator changed a pod's labels put the
// old labels back (seen as two pods labelled master at once in the e2e
// failover tests).
type statusOnlyClient struct{ kubernetes.Interface }

func (c statusOnlyClient) CoreV1() typedcorev1.CoreV1Interface {
	return statusOnlyCore{c.Interface.CoreV1()}
}

type statusOnlyCore struct{ typedcorev1.CoreV1Interface }

func (c statusOnlyCore) Pods(namespace string) typedcorev1.PodInterface {
	return statusOnlyPods{c.CoreV1Interface.Pods(namespace)}
}

type statusOnlyPods struct{ typedcorev1.PodInterface }

// UpdateStatus writes the status it is given with the pod's live labels
// and annotations, guarded by the resourceVersion it was given: a pod
// changed since then is a conflict (virtual-kubelet retries on a fresh
// copy), never a write of old labels.
func (c statusOnlyPods) UpdateStatus(ctx context.Context, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error) {
	live, err := c.Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod = pod.DeepCopy()
	pod.Labels, pod.Annotations = live.Labels, live.Annotations
	if pod.ResourceVersion == "" {
		pod.ResourceVersion = live.ResourceVersion
	}
	return c.PodInterface.UpdateStatus(ctx, pod, opts)
}
