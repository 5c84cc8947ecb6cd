// Package adapter reads adapter manifests (docs/adapters.md): YAML files that
// say how to prepare, launch, capture and judge one harness. Load validates a
// manifest strictly, naming the file, line and key of every problem, and
// Manifest.Session turns it into the session.Adapter a session runs.
package adapter
