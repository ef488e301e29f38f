// Package events builds run-event envelopes (proto agentplane.events.v1) for
// one run, encodes them to their wire JSON, and carries them over NATS
// JetStream: a Publisher that never blocks its caller, a Replay helper for
// consumers, and the batch completion notice subject.
//
// Subjects: every run event is stored in the stream AGENT_EVENTS on
// agents.<namespace>.<agent>.<kind>; batch completion notices travel on
// plain NATS subjects agentplane.batch.<namespace>.<agent>.
package events
