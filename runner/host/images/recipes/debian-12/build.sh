# debian-12: a bookworm minbase straight from mmdebstrap's tar output.
. "$SANDPROOF_COMMON"
mmdebstrap --variant=minbase --arch="$SANDPROOF_ARCH" \
	${SANDPROOF_PACKAGES:+--include="${SANDPROOF_PACKAGES// /,}"} \
	--customize-hook='bash "$SANDPROOF_COMMON" add_task_user "$1" /bin/bash' \
	bookworm "$SANDPROOF_OUT" "$SANDPROOF_MIRROR"
