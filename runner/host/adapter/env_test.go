package adapter_test

import "github.com/sandproof/sandproof/runner/host/session"

func sessionEnv() session.Env {
	return session.Env{SessionID: "s", Dir: "/s", Bin: "/s/bin", Home: "/s/home", RunDir: "/s/run/a", Prompt: "do it"}
}
