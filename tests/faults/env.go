package faults

import "time"

// The environment of the command (see faultchild).
const (
	envOracle = "FAULTS_ORACLE"
	envHold   = "FAULTS_HOLD"
	envMode   = "FAULTS_MODE"
)

// How often the command writes; a run that wrote once is alive.
const writeGap = 3 * time.Millisecond
