//go:build sandproof_mutant && mutant_confirmexit

package mutant

// Active is the mutation this build carries.
const Active = ConfirmExit
