package main

// The sandbox providers this binary offers (--provider), each registered
// by its package's init (provider.Register). A new provider is one import
// line here.
import (
	_ "github.com/sandproof/sandproof/runner/host/provider/docker"
)
