package mutant

// Name is one mutation. The build tag mutant_<name> (with sandproof_mutant)
// compiles it in, through the file m_<name>.go, which sets Active to it.
// What each breaks, and the contract clause whose specs must kill it, is in
// conformance/mutants' Catalog; its test checks that the catalogue, the
// m_*.go files and the Is call sites name exactly these constants.
type Name string

// The mutations, one per m_*.go file.
const (
	CallerGroup      Name = "callergroup"
	CgroupBlind      Name = "cgroupblind"
	CgroupNoThaw     Name = "cgroupnothaw"
	CgroupOnly       Name = "cgrouponly"
	CgroupTermAll    Name = "cgrouptermall"
	ClaimRace        Name = "claimrace"
	DeadlineExtends  Name = "deadlineextends"
	ConfirmExit      Name = "confirmexit"
	ExitCodes        Name = "exitcodes"
	FDLeak           Name = "fdleak"
	FenceAll         Name = "fenceall"
	GroupKill        Name = "groupkill"
	GraceWait        Name = "gracewait"
	GroupReuse       Name = "groupreuse"
	InPlaceReceipt   Name = "inplacereceipt"
	JSONBraces       Name = "jsonbraces"
	LateDeadline     Name = "latedeadline"
	MadeUpZero       Name = "madeupzero"
	NoCgroupKill     Name = "nocgroupkill"
	NoCont           Name = "nocont"
	NoHold           Name = "nohold"
	NoKernelWalk     Name = "nokernelwalk"
	NoKill           Name = "nokill"
	NoLease          Name = "nolease"
	NoMarker         Name = "nomarker"
	NoParentCheck    Name = "noparentcheck"
	NonJSONStop      Name = "nonjsonstop"
	NoReap           Name = "noreap"
	NoStartCheck     Name = "nostartcheck"
	NoSubCentisecond Name = "nosubcentisecond"
	NoSubreaper      Name = "nosubreaper"
	NoThreads        Name = "nothreads"
	ParamsMarker     Name = "paramsmarker"
	QuadraticCR      Name = "quadraticcr"
	RelPath          Name = "relpath"
	ServiceEnv       Name = "serviceenv"
	ServicePID       Name = "servicepid"
	ScanWait         Name = "scanwait"
	SupFDLeak        Name = "supfdleak"
	WaitNoRenew      Name = "waitnorenew"
	ZSkip            Name = "zskip"
)
