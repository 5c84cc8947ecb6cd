// Package launch owns a launch's state directory: its validation, the launch
// claim that fences a delayed start, the request files through which host
// commands (stop, renew, service) talk to the supervisor, and the liveness
// check of the supervisor recorded in the claim.
package launch
