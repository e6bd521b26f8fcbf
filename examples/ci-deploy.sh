#!/bin/sh
# A CI step: deployments to one environment queue up (--wait) for at most
# 10 minutes, then the step fails with 75 rather than hanging the pipeline.
set -eu
env_name=${1:-prod}
exec lockrun run --timeout 10m --holder "ci-job-${CI_JOB_ID:-local}" "deploy-$env_name" -- \
	sh -c 'echo "deploying '"$env_name"' (token $LOCKRUN_FENCING_TOKEN)"; sleep 0.2; echo "deployed '"$env_name"'"'
