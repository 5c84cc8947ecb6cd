//go:build sandproof_mutant && mutant_serviceenv

package mutant

// Active is the mutation this build carries.
const Active = ServiceEnv
