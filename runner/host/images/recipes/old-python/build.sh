# old-python: a bullseye minbase with python3, and a testbed dir whose python3
# is a symlink to the system's, as a conda-less SWE testbed would have it.
. "$SANDPROOF_COMMON"
mmdebstrap --variant=minbase --arch="$SANDPROOF_ARCH" \
	${SANDPROOF_PACKAGES:+--include="${SANDPROOF_PACKAGES// /,}"} \
	--customize-hook='bash "$SANDPROOF_COMMON" add_task_user "$1" /bin/bash' \
	--customize-hook='mkdir -p "$1/opt/testbed/bin" && for n in python3 python; do ln -sfn /usr/bin/python3 "$1/opt/testbed/bin/$n"; done' \
	bullseye "$SANDPROOF_OUT" "$SANDPROOF_MIRROR"
