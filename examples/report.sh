#!/bin/sh
# A stand-in for a real job: it says which run and token it got.
echo "report run $LOCKRUN_RUN_ID with token $LOCKRUN_FENCING_TOKEN"
