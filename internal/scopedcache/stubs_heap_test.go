package scopedcache

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/deckhand-dev/deckhand/internal/testenv/proc"
)

// maxStubBytes is what a stub may cost the manager's heap, with its entries
// in the informer's store and namespace index: about its key.
const maxStubBytes = 400

// A stub costs the cluster-wide informer little more than the object's key
// (issue 26: with 17 watched namespaces, 10,000 unrelated pods and 10,000
// unrelated Jobs took the manager to 88 MiB, their stubs ~1.9 KB each). The
// objects are decoded one by one, as a watch (or a streamed list) delivers
// them, each with strings of its own.
func TestStubCostsAboutItsKey(t *testing.T) {
	const n = 20000
	k := &kind{gvk: corev1.SchemeGroupVersion.WithKind("Pod"), poke: make(chan struct{}, 1), stubbed: sets.New[string]()}
	k.neededNow.Store(ptrTo(sets.New("needed")))
	transform := k.stubbing(nil)
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})

	before := proc.LiveHeap()
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("unrelated-%d-abcde", i), Namespace: strings.Clone("elsewhere"),
				UID: types.UID(fmt.Sprintf("5f0c6a3e-8a43-4b0e-9d1e-%012d", i)), ResourceVersion: fmt.Sprint(100000 + i),
				Labels:            map[string]string{"app": strings.Clone("web"), "pod-template-hash": strings.Clone("7d9f8c6b5")},
				CreationTimestamp: metav1.Now(),
			},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		}
		obj, err := transform(pod)
		if err != nil {
			t.Fatal(err)
		}
		if !isStub(obj) {
			t.Fatalf("a pod of a namespace nothing needs was held as %T", obj)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	per := (proc.LiveHeap() - before) / n
	runtime.KeepAlive(store)
	t.Logf("%d B of live heap per stub", per)
	if per > maxStubBytes {
		t.Errorf("a stub costs %d B of heap, more than %d", per, maxStubBytes)
	}
	if got, _ := store.ByIndex(toolscache.NamespaceIndex, "elsewhere"); len(got) != n {
		t.Errorf("the namespace index holds %d stubs, want %d", len(got), n)
	}
}
