//go:build sandproof_mutant && mutant_groupkill

package mutant

// Active is the mutation this build carries.
const Active = GroupKill
