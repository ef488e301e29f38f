package ctrltest

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// WatchStep is one change a watch test makes, and whether it must bring
// a pass of the object under test.
type WatchStep struct {
	Name    string
	Change  func() error
	Enqueue bool
}

// CheckEnqueues makes each step's change in turn, as a subtest, and checks
// that it enqueues what (the object of key, counted by passes) exactly
// when the step says: with passes that always succeed, only a watch can
// bring one. It first waits for the object's first pass.
func CheckEnqueues(t *testing.T, passes *Counter, key types.NamespacedName, what string, steps []WatchStep) {
	t.Helper()
	Eventually(t, 30*time.Second, func() error {
		if passes.Count(key) == 0 {
			return fmt.Errorf("no pass of the %s yet", what)
		}
		return nil
	})
	for _, st := range steps {
		t.Run(st.Name, func(t *testing.T) {
			passes.Drain(500 * time.Millisecond)
			before := passes.Count(key)
			if err := st.Change(); err != nil {
				t.Fatal(err)
			}
			if st.Enqueue {
				Eventually(t, 30*time.Second, func() error {
					if passes.Count(key) == before {
						return fmt.Errorf("the %s was not enqueued", what)
					}
					return nil
				})
				return
			}
			Consistently(t, time.Second, func() error {
				if n := passes.Count(key); n != before {
					return fmt.Errorf("the %s was enqueued (%d passes, %d before)", what, n, before)
				}
				return nil
			})
		})
	}
}
