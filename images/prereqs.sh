#!/usr/bin/env bash
# prereqs.sh [--quiet] — install from Debian's apt, when missing, every
# package the tests, the image builds and the engine need. This is the one
# list of them: `make prereqs` runs it, `make test`, `make certify` and
# `make engine` depend on that, and `images/engine.sh start` runs it too.
#
#   package          what needs it
#   procps           ps (the recorder benchmark, a developer reading a failure)
#   gcc, libc6-dev   cc: the glibc hello of runner/host/images/docker_test.go
#   musl-tools       musl-gcc: the musl hello of runner/host/images/docker_test.go
#   bash-static      /bin/bash-static: the session's private bash on images
#                    without one (runner/host/session, the integrity specs)
#   busybox-static   a static busybox: the busybox-only test images of
#                    runner/host/provider/docker and runner/host/session
#   docker.io        the engine (images/engine.sh)
#   mmdebstrap       the image builds (runner/host/images/build.go)
#   libxml2-utils    xmllint: junit.xml checked against the JUnit XSD
#                    (reports/junit_test.go)
#   chromium         a real browser: report.html's width measured at a
#                    laptop's (reports/layout_test.go)
#
# Installing needs root and apt-get (Debian 12); when everything is present
# it installs nothing, needs neither and prints nothing. Debian 12 cannot
# provide Node >= 20.6 with npm, which the Pi and OpenCode runtime tests
# (runner/host/runtimes) need: without --quiet a missing one is reported (those
# tests then fail under `make test`), never installed.
set -euo pipefail

quiet=
case ${1:-} in
--quiet) quiet=1 ;;
"") ;;
*)
	echo "usage: prereqs.sh [--quiet]" >&2
	exit 2
	;;
esac

say() { printf 'prereqs: %s\n' "$*" >&2; }

has() { command -v "$1" >/dev/null 2>&1; }

# static FILE: FILE runs and has no ELF interpreter (ldd exits 1 for "not
# a dynamic executable"). A dynamic busybox cannot run in an image
# without libc.
static() { [[ -x $1 ]] && ! ldd "$1" >/dev/null 2>&1; }

static_busybox() {
	local b
	b=$(command -v busybox 2>/dev/null) && static "$b"
}

# missing: the packages whose command or file is absent, one a line.
missing() {
	has ps || echo procps
	has cc || echo gcc
	[[ -e /usr/include/stdio.h ]] || echo libc6-dev
	has musl-gcc || echo musl-tools
	[[ -x /bin/bash-static ]] || echo bash-static
	static_busybox || echo busybox-static
	has dockerd && has docker || echo docker.io
	has mmdebstrap || echo mmdebstrap
	has xmllint || echo libxml2-utils
	has chromium || echo chromium
	# The python kind unpacks its pinned .debs' data.tar.xz.
	has xz || echo xz-utils
}

mapfile -t need < <(missing)
if ((${#need[@]})); then
	if ((EUID != 0)) || ! has apt-get; then
		say "missing ${need[*]}: run this script as root on Debian (it installs them with apt-get)"
		exit 1
	fi
	say "installing ${need[*]}"
	# needrestart (when installed) would ask or print; nothing here needs a restart.
	export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
	apt-get -o DPkg::Lock::Timeout=600 update -qq
	apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need[@]}" >/dev/null
	mapfile -t still < <(missing)
	if ((${#still[@]})); then
		say "still missing after apt-get install: ${still[*]}"
		exit 1
	fi
fi

[[ -n $quiet ]] && exit 0

# node_ok: node >= 20.6 and npm on PATH (runner/host/runtimes.MinNode).
node_ok() {
	has npm || return 1
	local v
	v=$(node --version 2>/dev/null) || return 1
	[[ $v =~ ^v([0-9]+)\.([0-9]+)\. ]] || return 1
	((BASH_REMATCH[1] > 20 || BASH_REMATCH[1] == 20 && BASH_REMATCH[2] >= 6))
}
node_ok || say "no Node >= 20.6 with npm on PATH (Debian 12's nodejs is 18; NodeSource's nodejs 20 works): the Pi and OpenCode runtime tests will fail under make test"
exit 0
