package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// undecodableError says why one stored object cannot be read as its Go
// type, naming the field, so the log line, the metric and the Agents that
// need the object all point at what to fix.
type undecodableError struct {
	Kind, Namespace, Name string
	// Field is the path of the value that does not decode, as admission
	// names it (spec.template.spec.containers[0].resources.limits.memory);
	// empty when it could not be found.
	Field string
	Err   error
}

func (e *undecodableError) Error() string {
	msg := fmt.Sprintf("%s %q cannot be read: ", e.Kind, e.Name)
	if e.Field != "" {
		msg += e.Field + ": "
	}
	return msg + e.Err.Error()
}

func (e *undecodableError) Unwrap() error { return e.Err }

func (e *undecodableError) key() string { return e.Namespace + "/" + e.Name }

// decode converts u into obj, or says which field of u does not convert.
// managedFields are dropped first: nothing here reads them, and they are
// often the larger part of an object's metadata, so converting and caching
// them would cost CPU and memory for every object watched.
func decode(u *unstructured.Unstructured, kind string, obj client.Object) (client.Object, error) {
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
	if err == nil {
		return obj, nil
	}
	return nil, &undecodableError{
		Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName(),
		Field: failingField(u.Object, reflect.TypeOf(obj), ""), Err: err,
	}
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// failingField returns the path of the innermost value of v that does not
// convert to its Go type t, or "" when v converts. The converter reports
// only the failing value's own error (a quantity's, a time's), not where
// it is; this walks down from the object to find it. It runs only for
// objects that failed, so converting each level again costs nothing that
// matters.
func failingField(v any, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if converts(v, t) {
		return ""
	}
	// A type that decodes itself (a quantity, a time) fails as a whole.
	if !reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		switch t.Kind() {
		case reflect.Struct:
			if m, ok := v.(map[string]any); ok {
				if p := failingStructField(m, t, path); p != "" {
					return p
				}
			}
		case reflect.Slice, reflect.Array:
			if s, ok := v.([]any); ok {
				for i, e := range s {
					if p := failingField(e, t.Elem(), path+"["+strconv.Itoa(i)+"]"); p != "" {
						return p
					}
				}
			}
		case reflect.Map:
			if m, ok := v.(map[string]any); ok {
				keys := make([]string, 0, len(m))
				for k := range m {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					if p := failingField(m[k], t.Elem(), mapKeyPath(path, k)); p != "" {
						return p
					}
				}
			}
		}
	}
	return path
}

func failingStructField(m map[string]any, t reflect.Type, path string) string {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case name == "" && f.Anonymous:
			// Inlined: its fields sit at this level.
			if p := failingField(m, f.Type, path); p != "" {
				return p
			}
			continue
		case name == "":
			name = f.Name
		}
		if v, ok := m[name]; ok {
			if p := failingField(v, f.Type, fieldPath(path, name)); p != "" {
				return p
			}
		}
	}
	return ""
}

// converts reports whether v converts to t, through a one-field holder
// since the converter starts from an object.
func converts(v any, t reflect.Type) bool {
	holder := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: t, Tag: `json:"v"`}}))
	return runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"v": v}, holder.Interface()) == nil
}

func fieldPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// mapKeyPath names a map entry as admission does (limits.memory), with
// brackets for a key that would read as more path (an annotation's).
func mapKeyPath(path, key string) string {
	if plainKey.MatchString(key) {
		return fieldPath(path, key)
	}
	return path + "[" + key + "]"
}

// undecodables are the stored objects of one kind that do not decode, by
// namespace/name: logged when first seen (and when a new version still
// does not decode), counted in controller_undecodable_objects, and
// forgotten when a readable version arrives, when the object is deleted,
// or when a complete LIST no longer holds it.
type undecodables struct {
	kind  string
	log   *slog.Logger
	gauge prometheus.Gauge

	mu    sync.Mutex
	byKey map[string]undecodable
}

type undecodable struct {
	// rv is the object's resourceVersion.
	rv uint64
	// seen is the newest LIST or event resourceVersion that showed the
	// object undecodable; a complete LIST newer than it did not.
	seen uint64
}

func newUndecodables(kind string, log *slog.Logger, gauge prometheus.Gauge) *undecodables {
	return &undecodables{kind: kind, log: log, gauge: gauge, byKey: map[string]undecodable{}}
}

// rvOf reads a resourceVersion as the integer etcd-backed servers issue; 0
// for one that is not.
func rvOf(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}

// failed records that the object of err at resourceVersion rv, seen in a
// LIST or event at seen, does not decode, and reports whether it was
// already recorded (so no readable version of it is cached).
func (b *undecodables) failed(err error, rv, seen string) (known bool) {
	e, ok := unreadable(err)
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	old, known := b.byKey[e.key()]
	entry := undecodable{rv: max(old.rv, rvOf(rv)), seen: max(old.seen, rvOf(seen))}
	b.byKey[e.key()] = entry
	b.gauge.Set(float64(len(b.byKey)))
	if !known || entry.rv != old.rv {
		b.log.Warn("object cannot be decoded; it is left out until it is fixed or deleted",
			"kind", b.kind, "object", e.key(), "field", e.Field, "err", e.Err)
	}
	return known
}

// readable forgets u's object when u is at least as new as the version
// that did not decode.
func (b *undecodables) readable(u *unstructured.Unstructured) {
	key := u.GetNamespace() + "/" + u.GetName()
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.byKey[key]; ok && old.rv <= rvOf(u.GetResourceVersion()) {
		delete(b.byKey, key)
		b.gauge.Set(float64(len(b.byKey)))
		b.log.Info("object can be decoded again", "kind", b.kind, "object", key)
	}
}

// known reports whether the object of key is recorded as undecodable at
// resourceVersion rv or later; if so, seen (a LIST's resourceVersion) now
// shows it too, so listed(seen) keeps it.
func (b *undecodables) known(key, rv, seen string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.byKey[key]
	if !ok || e.rv < rvOf(rv) {
		return false
	}
	e.seen = max(e.seen, rvOf(seen))
	b.byKey[key] = e
	return true
}

// deleted forgets u's object and reports whether it was recorded.
func (b *undecodables) deleted(u *unstructured.Unstructured) bool {
	key := u.GetNamespace() + "/" + u.GetName()
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.byKey[key]
	delete(b.byKey, key)
	b.gauge.Set(float64(len(b.byKey)))
	return ok
}

// listed forgets the objects a complete LIST at listRV did not show: they
// were deleted, or became readable, while no watch was open.
func (b *undecodables) listed(listRV string) {
	at := rvOf(listRV)
	b.mu.Lock()
	defer b.mu.Unlock()
	for key, e := range b.byKey {
		if e.seen < at {
			delete(b.byKey, key)
		}
	}
	b.gauge.Set(float64(len(b.byKey)))
}

// getDecoded reads key into obj as client.Get does, but through
// unstructured, so an object that does not decode comes back as an
// *undecodableError naming the field rather than as a bare decode error.
func (c *Controller) getDecoded(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	gvk, err := c.c.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.c.Get(ctx, key, u); err != nil {
		return err
	}
	_, err = decode(u, gvk.Kind, obj)
	return err
}

// unreadable returns the undecodable object err is about, if it is.
func unreadable(err error) (*undecodableError, bool) {
	var e *undecodableError
	ok := errors.As(err, &e)
	return e, ok
}
