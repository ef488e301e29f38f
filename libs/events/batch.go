package events

import (
	"fmt"

	"github.com/nats-io/nats.go"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// BatchSubjectPrefix starts every batch completion notice subject.
const BatchSubjectPrefix = "agentplane.batch"

// BatchSubject returns agentplane.batch.<namespace>.<agent>, the plain NATS
// subject a batch completion notice for that Agent travels on. An empty
// namespace or agent gives the '*' wildcard, for subscribers.
func BatchSubject(namespace, agent string) string {
	ns, ag := subjectTokens(namespace, agent)
	if namespace == "" {
		ns = "*"
	}
	if agent == "" {
		ag = "*"
	}
	return BatchSubjectPrefix + "." + ns + "." + ag
}

// PublishBatchNotice sends ev (a batch event of the run whose batch
// finished) on the run's batch subject. It is core NATS, fire and forget:
// the notice only wakes the controller early, which also polls.
func PublishBatchNotice(nc *nats.Conn, ev *eventsv1.RunEvent) error {
	data, err := Encode(ev)
	if err != nil {
		return err
	}
	subj := BatchSubject(ev.GetRun().GetNamespace(), ev.GetRun().GetAgent())
	if err := nc.Publish(subj, data); err != nil {
		return fmt.Errorf("publish batch notice on %s: %w", subj, err)
	}
	return nil
}

// SubscribeBatchNotices calls fn for every notice for namespace/agent (empty
// means any) until the subscription is drained or unsubscribed. Notices
// that do not decode are skipped.
func SubscribeBatchNotices(nc *nats.Conn, namespace, agent string, fn func(*eventsv1.RunEvent)) (*nats.Subscription, error) {
	subj := BatchSubject(namespace, agent)
	sub, err := nc.Subscribe(subj, func(m *nats.Msg) {
		if ev, err := DecodeMessage(m.Data, m.Header); err == nil {
			fn(ev)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", subj, err)
	}
	return sub, nil
}
