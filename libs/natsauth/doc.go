// Package natsauth gives every NATS client of the platform its own scoped
// credential, using NATS decentralised JWT authentication
// (https://docs.nats.io/running-a-nats-service/configuration/securing_nats/auth_intro/jwt).
//
// An Authority is the operator, the system account and the platform
// account, generated once (agentctl nats init) and configured in
// nats-server. The platform account's signing key lives in a Secret that
// only agent-controller mounts: its Issuer mints, for each run, a user that
// may publish only on that run's subjects (agents.<ns>.<agent>.> and the
// namespace's sink prefix) and subscribe only to its own reply inbox, so a
// run can neither read the stream, nor touch another run's subjects, nor
// manage the stream. Services get users with the account's full rights.
//
// docs/security.md describes the whole NATS boundary.
package natsauth
