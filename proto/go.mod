module github.com/agentplane/agentplane/proto

go 1.26.8

require (
	google.golang.org/grpc v1.82.1
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.53.0 // indirect
	golang.org/x/sys v0.43.0 // indirect
	golang.org/x/text v0.36.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260414002931-afd174a4e478 // indirect
)
