#!/usr/bin/env bash
# Prints the packages of the current module whose tests need no control
# plane: their test binaries do not link libs/testenv, which starts
# etcd + kube-apiserver. `make test-unit` runs exactly these.
set -euo pipefail
go list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
  awk '$1 ~ /\.test$/ && $0 !~ / github\.com\/agentplane\/agentplane\/libs\/testenv( |$)/ { sub(/\.test$/, "", $1); print $1 }'
