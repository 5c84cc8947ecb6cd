# alpine-class: a rootfs assembled from the contents of two .deb files (musl
# and busybox-static) plus a handful of /etc files written here.
. "$SANDPROOF_COMMON"
root=$SANDPROOF_WORK/rootfs
debs=$SANDPROOF_WORK/debs
mkdir -p "$root" "$debs"

# apt-get download reads the host's package lists; fetch them once if they
# are missing (a fresh machine).
if ! apt-cache show $SANDPROOF_PACKAGES >/dev/null 2>&1; then
	apt-get update -qq
fi
(cd "$debs" && apt-get download -q -o APT::Sandbox::User=root $SANDPROOF_PACKAGES)
for deb in "$debs"/*.deb; do
	dpkg-deb -x "$deb" "$root"
done
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian" "$root/usr/share/initramfs-tools"

case $SANDPROOF_ARCH in
amd64) march=x86_64 ;;
arm64) march=aarch64 ;;
*) echo "alpine-class: unsupported arch $SANDPROOF_ARCH" >&2; exit 1 ;;
esac
[[ -e $root/lib/ld-musl-$march.so.1 ]] || { echo "alpine-class: musl loader missing" >&2; exit 1; }
# Alpine's name for musl's libc, which musl-linked binaries (OpenCode's musl
# build among them) ask for in DT_NEEDED.
ln -sfn "ld-musl-$march.so.1" "$root/lib/libc.musl-$march.so.1"
# musl's loader reads its search path from this file; Debian's points into a
# multiarch dir, Alpine's is the plain FHS list.
printf '/lib\n/usr/local/lib\n/usr/lib\n/lib/%s-linux-musl\n' "$march" >"$root/etc/ld-musl-$march.path"
rm -rf "$root/etc/ld-musl-$march.d"

# BusyBox as /bin/sh and every other applet, as absolute symlinks the way
# Alpine installs them. The static binary runs on the host to list them.
# Its package-manager applets (dpkg, rpm) are left out: the image has no
# package manager, and a harness that probes for one must find none.
mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin"
"$root/bin/busybox" --list-full | while read -r applet; do
	case ${applet##*/} in dpkg | dpkg-deb | rpm | rpm2cpio) continue ;; esac
	[[ -e $root/$applet || -L $root/$applet ]] && continue
	mkdir -p "$root/$(dirname "$applet")"
	ln -s /bin/busybox "$root/$applet"
done

mkdir -p "$root"/{etc,root,tmp,var/tmp,run,proc,sys,dev,home,usr/local/bin,usr/local/lib}
chmod 1777 "$root/tmp" "$root/var/tmp"
chmod 0700 "$root/root"
cat >"$root/etc/os-release" <<'OS'
NAME="sandproof alpine-class"
ID=sandproof-alpine-class
VERSION_ID=1
PRETTY_NAME="sandproof alpine-class 1 (musl + BusyBox; not Alpine Linux)"
HOME_URL="https://github.com/sandproof/sandproof"
OS
cat >"$root/etc/passwd" <<'PW'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
PW
cat >"$root/etc/group" <<'GR'
root:x:0:
nogroup:x:65534:
GR
printf 'root:*:19000:0:::::\nnobody:!:19000:0:::::\n' >"$root/etc/shadow"
chmod 0640 "$root/etc/shadow"
add_task_user "$root" /bin/sh

tar --numeric-owner -C "$root" -cf "$SANDPROOF_OUT" .
