package ctrltest

import (
	"sigs.k8s.io/controller-runtime/pkg/config"
)

// ctrlConfig lets each test start a fresh manager whose controllers reuse
// the names of the previous test's (controller-runtime refuses duplicate
// names process-wide for metrics otherwise).
func ctrlConfig() config.Controller {
	skip := true
	return config.Controller{SkipNameValidation: &skip}
}
