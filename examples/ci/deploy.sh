#!/bin/sh
# Stands for your deploy in the CI examples: it prints when it starts and
# ends, so that the examples test can see deploys never overlap.
set -eu
echo "deploying $1 (token $LOCKRUN_FENCING_TOKEN, holder $LOCKRUN_HOLDER)"
sleep 0.3
echo "deployed $1"
