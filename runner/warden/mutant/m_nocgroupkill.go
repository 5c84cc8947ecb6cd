//go:build sandproof_mutant && mutant_nocgroupkill

package mutant

// Active is the mutation this build carries.
const Active = NoCgroupKill
