//go:build sandproof_mutant && mutant_inplacereceipt

package mutant

// Active is the mutation this build carries.
const Active = InPlaceReceipt
