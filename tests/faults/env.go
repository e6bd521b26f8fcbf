package faults

// The environment of the command (see faultchild).
const (
	envOracle = "FAULTS_ORACLE"
	envHold   = "FAULTS_HOLD"
	envMode   = "FAULTS_MODE"
)
