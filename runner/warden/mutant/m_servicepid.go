//go:build sandproof_mutant && mutant_servicepid

package mutant

// Active is the mutation this build carries.
const Active = ServicePID
