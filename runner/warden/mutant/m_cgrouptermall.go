//go:build sandproof_mutant && mutant_cgrouptermall

package mutant

// Active is the mutation this build carries.
const Active = CgroupTermAll
