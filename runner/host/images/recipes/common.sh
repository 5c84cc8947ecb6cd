# common.sh — helpers shared by the recipes' build.sh scripts. Part of every
# recipe's content hash: changing it rebuilds every image.
#
# A recipe's build.sh runs under bash on the host, as root, in an empty work
# directory, with:
#   SANDPROOF_OUT       the rootfs tar to write (docker import reads it)
#   SANDPROOF_WORK      scratch space, removed after the build
#   SANDPROOF_PACKAGES  the recipe's package list, space-separated
#   SANDPROOF_MIRROR    the Debian mirror (default http://deb.debian.org/debian)
#   SANDPROOF_ARCH      the Debian architecture (amd64, arm64): the host's
#   SANDPROOF_COMMON    this file
set -euo pipefail

# add_task_user ROOT SHELL: the unprivileged user the harness runs as (uid and
# gid 1000, HOME /home/task). Written into the files directly rather than with
# useradd, so the same code serves the hand-made rootfs that has no useradd.
add_task_user() {
	local root=$1 shell=$2
	grep -q '^task:' "$root/etc/passwd" && return 0
	echo "task:x:1000:1000:task:/home/task:$shell" >>"$root/etc/passwd"
	echo "task:x:1000:" >>"$root/etc/group"
	if [[ -f $root/etc/shadow ]]; then
		echo "task:!:19000:0:99999:7:::" >>"$root/etc/shadow"
	fi
	if [[ -f $root/etc/gshadow ]]; then
		echo "task:!::" >>"$root/etc/gshadow"
	fi
	mkdir -p "$root/home/task"
	chown 1000:1000 "$root/home/task"
	chmod 0755 "$root/home/task"
}

# Run as a script (mmdebstrap hooks run under sh, which cannot source this
# file), `bash common.sh FUNCTION ARGS...` calls the function.
if [[ ${BASH_SOURCE[0]} == "$0" && $# -gt 0 ]]; then
	"$@"
fi
