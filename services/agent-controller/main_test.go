package main

import (
	"os"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{ControllerManager: true, APIServerArgs: map[string]string{
		// As on OpenShift: an object that blocks its owner's deletion may
		// only be created by who may update the owner's finalizers, so the
		// RBAC rule on agents/finalizers is put to use.
		"enable-admission-plugins": "OwnerReferencesPermissionEnforcement",
	}}))
}
